// A non-owning reference to a callable, like C++26's std::function_ref: two
// pointers, never allocates. The thread pool takes its tasks this way so a
// parallel loop in the token loop costs no heap allocation (std::function
// allocates once its lambda captures more than two pointers).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace tessera {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
public:
    template <typename F>
        requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
    FunctionRef(F&& f)  // NOLINT: implicit on purpose, like std::function
        : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
          call_([](void* object, Args... args) -> R {
              return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
          }) {}

    R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

private:
    void* object_;
    R (*call_)(void*, Args...);
};

}  // namespace tessera
