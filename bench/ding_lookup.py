"""A floor for the quickstart: translate each Ding test sentence by looking up its nearest training example.

    python -m bench.ding_lookup [--ding /usr/share/trans/de-en] [--split test]

Inputs: the Ding dictionary (Debian's trans-de-en) split as mt splits it (mt.data.ding: 500 valid and 500
test sentence pairs held out, the ~17k other sentence pairs for training). For each held-out German
sentence, the training pair whose German shares the most words with it, each shared word weighted
by its inverse document frequency and each word not shared costing a tenth of that, gives its
English as the "translation". Scored with sacreBLEU against the references. A model that scores no
better than this has learnt to retrieve, not to translate. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def nearest_examples(train: list[tuple[str, str]], queries: list[str]) -> list[tuple[int, float]]:
    """For each query, (index of the nearest training pair, word overlap as Jaccard)."""
    train_words = [words(de) for de, _ in train]
    frequency = collections.Counter(w for ws in train_words for w in ws)
    index: dict[str, list[int]] = collections.defaultdict(list)
    for i, ws in enumerate(train_words):
        for w in ws:
            index[w].append(i)
    found = []
    for query in queries:
        q = words(query)
        score: collections.Counter = collections.Counter()
        for w in q:
            for i in index.get(w, ()):
                score[i] += math.log(len(train) / frequency[w])
        best = max(score, key=lambda i: score[i] / (1 + 0.1 * len(train_words[i] ^ q))) if score else 0
        found.append((best, len(train_words[best] & q) / max(1, len(train_words[best] | q))))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ding", default="/usr/share/trans/de-en")
    parser.add_argument("--split", default="test", choices=("valid", "test"))
    args = parser.parse_args()

    import sacrebleu

    from mt.data.ding import held_out_splits

    parts = held_out_splits(args.ding)
    train, held = parts["sentences"], parts[args.split]
    found = nearest_examples(train, [de for de, _ in held])
    hyps, refs = [train[i][1] for i, _ in found], [en for _, en in held]
    bleu, chrf = sacrebleu.corpus_bleu(hyps, [refs]), sacrebleu.corpus_chrf(hyps, [refs])
    overlaps = [overlap for _, overlap in found]
    print(f"Ding {args.split}, DE->EN: nearest training example of {len(held)} sentences among {len(train):,}")
    print("| BLEU | chrF | overlap > 0.5 | overlap > 0.7 |")
    print("|---|---|---|---|")
    print(f"| {bleu.score:.2f} | {chrf.score:.2f} | {sum(o > 0.5 for o in overlaps)} | {sum(o > 0.7 for o in overlaps)} |")
    for (de, en), hyp in list(zip(held, hyps))[:3]:
        print(f"  {de}\n    ref: {en}\n    nearest: {hyp}", file=sys.stderr)
    print(json.dumps({"split": args.split, "sentences": len(held), "train_pairs": len(train), "bleu": round(bleu.score, 2),
                      "chrf": round(chrf.score, 2), "signature": str(bleu.get_signature()),
                      "date": time.strftime("%Y-%m-%d", time.gmtime())}))


if __name__ == "__main__":
    main()
