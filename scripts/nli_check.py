#!/usr/bin/env python3
"""Checks the NLI judge's template with the local model on pairs whose label is known.

Pairs come from a normalised dataset file (HotpotQA by default), from examples after the ones the
results tables use. The premise is a supporting paragraph ("title: text"); the hypotheses are
  entail           a sentence of that paragraph (entailed),
  other_paragraph  a sentence of the example's other supporting paragraph (not entailed),
  swapped_subject  a sentence of the paragraph that names its title, with the other paragraph's
                   title put in its place (not entailed).
Each pair is sent once per template through the `chat` example of hopwise-llama (greedy, one user
message, no system prompt), and the reply's first word is read as the label.

  cargo build --release -p hopwise-llama --example chat
  scripts/nli_check.py --data $DATA/hotpotqa.jsonl --per-kind 10 \\
      --template current=crates/hopwise-core/prompts/default.toml \\
      --template earlier=<(git show a0fc29b~1:crates/hopwise-core/prompts/default.toml)
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tomllib


def sentences(text):
    return [s.strip() for s in re.split(r'(?<=[.!?])\s+', text) if 30 <= len(s.strip()) <= 200]


def build_pairs(path, skip, per_kind, seed):
    rng = random.Random(seed)
    kinds = {'entail': [], 'other_paragraph': [], 'swapped_subject': []}
    examples = []
    with open(path, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                examples.append(json.loads(line))
            except json.JSONDecodeError as e:
                print(f'nli_check: {path}:{number}: skipped ({e})', file=sys.stderr)
    examples = examples[skip:]
    for example in examples:
        supporting = [p for p in example.get('paragraphs', []) if p.get('supporting')]
        if len(supporting) < 2:
            continue
        a, b = supporting[0], supporting[1]
        premise = f"{a['title']}: {a['text']}"
        own, other = sentences(a['text']), sentences(b['text'])
        if len(own) >= 2 and len(kinds['entail']) < per_kind:
            kinds['entail'].append((premise, rng.choice(own[1:]), True))
        if other and len(kinds['other_paragraph']) < per_kind:
            kinds['other_paragraph'].append((premise, rng.choice(other), False))
        named = [s for s in own if a['title'] in s and a['title'] != b['title']]
        if named and len(kinds['swapped_subject']) < per_kind:
            kinds['swapped_subject'].append((premise, named[0].replace(a['title'], b['title']), False))
    return kinds


def judge(chat, template, premise, hypothesis):
    prompt = template.replace('{premise}', premise).replace('{hypothesis}', hypothesis)
    env = dict(os.environ, HOPWISE_THREADS=os.environ.get('HOPWISE_THREADS', '1'))
    run = subprocess.run([chat, 'qwen2.5-1.5b', prompt], capture_output=True, text=True, env=env)
    if run.returncode != 0:
        sys.exit(f'nli_check: the chat example failed ({run.returncode}): {run.stderr.strip()[-500:]}')
    out = run.stdout
    lines = out.splitlines()
    reply = next((lines[i + 1] for i, line in enumerate(lines[:-1]) if line.startswith('--- 0')), '')
    return reply.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--data', required=True, help='normalised dataset file')
    ap.add_argument('--skip', type=int, default=300, help='examples skipped first (the tables use the first 50)')
    ap.add_argument('--per-kind', type=int, default=10)
    ap.add_argument('--seed', type=int, default=7)
    ap.add_argument('--template', action='append', required=True, metavar='NAME=PROMPTS.toml',
                    help="a prompts file whose [nli_judge] is checked (repeatable)")
    ap.add_argument('--chat', default=os.path.expanduser(
        os.path.join(os.environ.get('CARGO_TARGET_DIR', 'target'), 'release/examples/chat')))
    ap.add_argument('--json', action='store_true', help='print one JSON line per judgement')
    args = ap.parse_args()

    if not os.access(args.chat, os.X_OK):
        sys.exit(f'nli_check: no chat example at {args.chat}; build it with '
                 '`cargo build --release -p hopwise-llama --example chat` or pass --chat')
    templates = {}
    for spec in args.template:
        name, _, path = spec.partition('=')
        try:
            with open(path, 'rb') as f:
                templates[name] = tomllib.load(f)['nli_judge']['text']
        except (OSError, tomllib.TOMLDecodeError, KeyError) as e:
            sys.exit(f'nli_check: {path}: no readable [nli_judge] template ({e})')
    kinds = build_pairs(args.data, args.skip, args.per_kind, args.seed)
    right = {(name, kind): 0 for name in templates for kind in kinds}
    said_entail = {name: 0 for name in templates}
    for i in range(args.per_kind):
        for kind, pairs in kinds.items():
            if i >= len(pairs):
                continue
            premise, hypothesis, entailed = pairs[i]
            for name, template in templates.items():
                reply = judge(args.chat, template, premise, hypothesis)
                says = reply.lower().lstrip(' *').startswith('entail')
                right[(name, kind)] += says == entailed
                said_entail[name] += says
                if args.json:
                    print(json.dumps({'template': name, 'kind': kind, 'entailed': entailed, 'reply': reply}), flush=True)
    print('| template | ' + ' | '.join(kinds) + ' | all | said "entail" |')
    print('|---|' + '---:|' * (len(kinds) + 2))
    for name in templates:
        cells = [f'{right[(name, k)]} / {len(kinds[k])}' for k in kinds]
        total = sum(right[(name, k)] for k in kinds)
        n = sum(len(v) for v in kinds.values())
        print(f'| {name} | ' + ' | '.join(cells) + f' | {total} / {n} | {said_entail[name]} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
