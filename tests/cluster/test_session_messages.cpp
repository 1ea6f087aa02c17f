// The hello-reply's cpu_target, read as hostile input: a worker reports the
// SIMD target its kernels run on; an older worker leaves it out; a wrong type
// or an oversized string is an Error, never an exception of another kind.
#include "cluster/session_messages.h"
#include "util/error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace tessera {

TEST(SessionMessages, HelloReplyCpuTargetIsAShortStringOrAbsent) {
    const nlohmann::json base = {{"ok", true}, {"free_memory", 1024}, {"has_model", true}};
    nlohmann::json j = base;
    j["cpu_target"] = "AVX2";
    EXPECT_EQ(parse_hello_reply(j, "peer").cpu_target, "AVX2");
    EXPECT_EQ(parse_hello_reply(base, "peer").cpu_target, "");  // an older worker
    for (const nlohmann::json& bad :
         {nlohmann::json(5), nlohmann::json::array({"AVX2"}), nlohmann::json(true), nlohmann::json(std::string(33, 'A'))}) {
        j["cpu_target"] = bad;
        EXPECT_THROW(parse_hello_reply(j, "peer"), Error) << bad.dump();
    }
}

}  // namespace tessera
