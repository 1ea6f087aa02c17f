// Which build the tests run in, for the sweeps that keep a smaller share in
// the sanitizer build: there each case costs several times what it costs in
// Release, and a case that differs from another only in data (a weight type,
// a plan above the same API code) adds no code path for the sanitizers to
// watch, while the Release step still runs every case and checks its bits.
#pragma once

namespace tessera::test {

// g++ defines __SANITIZE_ADDRESS__ under -fsanitize=address; clang says it
// through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace tessera::test
