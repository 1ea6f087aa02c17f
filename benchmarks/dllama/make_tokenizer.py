#!/usr/bin/python3
"""Write a distributed-llama tokenizer file (.t) from a Hugging Face tokenizer.json (+ tokenizer_config.json),
without transformers. Mirrors converter/convert-tokenizer-hf.py (resolvePreTrainedTokenizerFast) and
converter/tokenizer-writer.py of distributed-llama (commit 8d624a7b).

Format: int32 magic 0x567124, int32 headerSize (= 8 + 8*nKeys), (key,value) int32 pairs
  keys: version=0 (must be 1), vocab_size=1, max_token_length=2, bos_id=3, chat_template=7 (byte length),
        n_eos_tokens=9, add_bos=10
then chat template bytes, then n_eos int32 ids, then per token: float32 score, uint32 length, bytes.
Scores are -id (as the official converter does). Note dllama treats ids >= bos_id as "special" tokens.

Usage: make_tokenizer.py tokenizer.json out.t [--config tokenizer_config.json] [--bos 151643] [--eos 151645 151643]
"""
import argparse
import json
import struct


def unicode_to_bytes():
    bs = list(range(ord('!'), ord('~') + 1)) + list(range(ord('¡'), ord('¬') + 1)) + list(range(ord('®'), ord('ÿ') + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip([chr(c) for c in cs], bs))


def main():
    p = argparse.ArgumentParser()
    p.add_argument('tokenizer_json')
    p.add_argument('output')
    p.add_argument('--config', default=None, help='tokenizer_config.json (chat_template, add_bos_token)')
    p.add_argument('--bos', type=int, default=151643, help='Qwen3 config.json bos_token_id')
    p.add_argument('--eos', type=int, nargs='+', default=[151645, 151643])
    a = p.parse_args()

    j = json.load(open(a.tokenizer_json, encoding='utf-8'))
    id2tok = {}
    for tok, i in j['model']['vocab'].items():
        id2tok[i] = (tok, False)
    for t in j.get('added_tokens', []):
        id2tok[t['id']] = (t['content'], True)
    n = max(id2tok) + 1
    assert len(id2tok) == n, 'vocab ids are not contiguous'
    utb = unicode_to_bytes()
    tokens = []
    for i in range(n):
        s, added = id2tok[i]
        if added:
            b = s.encode('utf-8')
        else:
            out = []
            for ch in s:
                if ch in utb:
                    out.append(utb[ch])
                else:
                    out += list(ch.encode('utf-8'))
            b = bytes(out)
        assert len(b) > 0
        tokens.append(b)

    chat_template, add_bos = None, True
    if a.config:
        c = json.load(open(a.config, encoding='utf-8'))
        if 'chat_template' in c:
            chat_template = c['chat_template'].encode('utf-8')
        if 'add_bos_token' in c:
            add_bos = bool(c['add_bos_token'])

    params = [(3, a.bos), (0, 1), (1, n), (2, max(len(t) for t in tokens))]
    if chat_template:
        params.append((7, len(chat_template)))
    params += [(9, len(a.eos)), (10, 1 if add_bos else 0)]
    data = b''.join(struct.pack('ii', k, v) for k, v in params)
    with open(a.output, 'wb') as f:
        f.write(struct.pack('ii', 0x567124, 8 + len(data)))
        f.write(data)
        if chat_template:
            f.write(chat_template)
        for e in a.eos:
            f.write(struct.pack('i', e))
        for i, t in enumerate(tokens):
            f.write(struct.pack('fI', -float(i), len(t)))
            f.write(t)
    print(f'wrote {a.output}: vocab {n}, bos {a.bos}, eos {a.eos}, add_bos {add_bos}, '
          f'chat_template {len(chat_template) if chat_template else 0} B')


if __name__ == '__main__':
    main()
