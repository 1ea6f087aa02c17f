// Real models' chat templates rendered here and by Python's jinja2 (as
// Hugging Face configures it): tests/data/templates/render_reference.py wrote
// the expected bytes and cases.json; every template x conversation must
// match exactly, and where jinja2 refused a conversation we must refuse too.
#include "chat/chat_template.h"

#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace tessera {
namespace {

std::string templates_dir() { return test::source_dir() + "/tests/data/templates/"; }

std::tm fixed_now() {
    std::tm tm{};
    tm.tm_year = 2025 - 1900;
    tm.tm_mon = 2;
    tm.tm_mday = 14;
    tm.tm_hour = 10;
    tm.tm_min = 30;
    tm.tm_wday = 5;  // Friday
    tm.tm_yday = 72;
    return tm;
}

TEST(ChatTemplate, MatchesJinja2OnRealTemplates) {
    const auto cases = nlohmann::ordered_json::parse(test::read_text(templates_dir() + "cases.json"));
    int compared = 0, refused = 0;
    for (const auto& r : cases["renders"]) {
        const std::string name = r["template"];
        const std::string case_name = r["case"];
        SCOPED_TRACE(name + " / " + case_name);
        const auto& c = cases["cases"][case_name];
        const auto& tokens = cases["tokens"][name];
        ChatTemplate tmpl(test::read_text(templates_dir() + name));
        tmpl.set_now(fixed_now);
        auto run = [&] {
            return tmpl.render(c["messages"], c["add_generation_prompt"].get<bool>(), tokens["bos"], tokens["eos"],
                               c.value("extra", nlohmann::ordered_json::object()));
        };
        if (r.contains("error")) {
            ++refused;
            try {
                run();
                ADD_FAILURE() << "rendered, but jinja2 failed with: " << r["error"];
            } catch (const jinja::TemplateRaised& e) {
                EXPECT_TRUE(r["raised"].get<bool>()) << "jinja2 failed otherwise: " << r["error"];
                EXPECT_EQ(std::string(e.what()), r["error"].get<std::string>());
            } catch (const Error& e) {
                EXPECT_FALSE(r["raised"].get<bool>()) << e.what();
            }
            continue;
        }
        ++compared;
        std::string got;
        try {
            got = run();
        } catch (const std::exception& e) {
            ADD_FAILURE() << "threw: " << e.what();
            continue;
        }
        EXPECT_EQ(got, test::read_text(templates_dir() + r["expected"].get<std::string>()));
    }
    EXPECT_GT(compared, 100);
    EXPECT_GT(refused, 0);
}

TEST(ChatTemplate, ChatMlFallback) {
    ChatTemplate tmpl(chatml_template());
    nlohmann::json messages = {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}};
    EXPECT_EQ(tmpl.render(messages, true, "", ""),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(tmpl.render(messages, false, "", ""), "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, NamedBuiltinsParseAndRender) {
    nlohmann::json messages = {{{"role", "user"}, {"content", "Hi"}}};
    for (const auto& name : builtin_chat_template_names()) {
        SCOPED_TRACE(name);
        auto source = builtin_chat_template(name);
        ASSERT_TRUE(source);
        ChatTemplate tmpl(*source);
        EXPECT_NE(tmpl.render(messages, true, "<s>", "</s>").find("Hi"), std::string::npos);
    }
    EXPECT_EQ(ChatTemplate(*builtin_chat_template("llama3")).render(messages, true, "<|begin_of_text|>", ""),
              "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    EXPECT_FALSE(builtin_chat_template("no-such-template"));
}

TEST(ChatTemplate, ExtraVariablesAndStrftime) {
    ChatTemplate tmpl("{{ strftime_now('%d %b %Y') }}|{{ custom }}|{{ messages | length }}");
    tmpl.set_now(fixed_now);
    EXPECT_EQ(tmpl.render(nlohmann::json::array(), false, "", "", {{"custom", 7}}), "14 Mar 2025|7|0");
}

TEST(ChatTemplate, BadInputsAreErrors) {
    EXPECT_THROW(ChatTemplate("{% if x %}"), Error);
    ChatTemplate tmpl("{{ messages[0].content }}");
    EXPECT_THROW(tmpl.render(nlohmann::json::object(), false, "", ""), Error);
    EXPECT_THROW(tmpl.render(nlohmann::json::array(), false, "", ""), Error);  // undefined attribute
}

}  // namespace
}  // namespace tessera
