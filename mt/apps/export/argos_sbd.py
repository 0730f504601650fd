"""The sentence splitter an Argos package carries (`mt export --format argos`), so that nothing is
downloaded when it translates.

Argos Translate splits each paragraph into sentences before translating. Its default splitter is
MiniSBD (Stanza's tokenizer networks as ONNX files): a package with `minisbd/<lang>.onnx` uses that
file, and one without downloads MiniSBD's model for the source language on first use. mt trains no
sentence splitter and ships none of MiniSBD's (they are downloaded, AGPL-licensed Stanza models), so
the package carries a small ONNX model in MiniSBD's format that computes a rule instead of a network:

    a sentence ends after . ! ? … ؟ । ۔ and Greek's ; (U+037E) (or one of them and a closing quote or bracket) followed by
    whitespace, unless the next word begins with a lowercase letter; and after 。！？．｡ always (or
    after the closing quote or bracket right after one: 「こんにちは。」と);

which keeps "z.B. der", "3.5" and "e.g. the" whole and splits "Er kam. Sie ging." (and, unlike a
trained splitter, "Dr. Smith"). In a language that writes ordinals with a stop (German's "am 3. Mai",
ORDINAL_DOT), a stop after one or two digits ends no sentence ("2024." does). Argos reads it as MiniSBD's own (`minisbd.SBDetect(path)`): the
per-character logits of classes 0 (inside a token), 1 (a token ends here), 2 (a sentence ends here),
from the character ids ("units") of the vocabulary stored in the file's metadata. MiniSBD's model for
the language is a drop-in replacement (docs/exporting.md). Building the file needs the `onnx` package.
"""

from __future__ import annotations

import json

from mt.errors import MtError

TERMINALS = ".!?…؟।۔\u037e"  # end a sentence when whitespace and no lowercase letter follow (Urdu's ۔, Greek's question mark, U+037E)
ALWAYS = "。！？．｡"  # end a sentence wherever they are (no spaces in those scripts), after a closer that follows
CLOSERS = "\"'”’“‘»«›‹)]」』"  # after a terminal, the sentence ends after them ("„Komm.“ Dann", "»Nein.« Er")
DIGITS = "0123456789"
# Languages whose ordinals end in a stop ("am 3. Mai", "3. kerros"): a stop after one or two digits
ORDINAL_DOT = frozenset("de da nb nn no fi cs sk pl hu tr sl hr sr bs lv lt et is fo".split())
SPECIALS = ("<PAD>", "<UNK>")  # MiniSBD's vocabulary begins with these (ids 0 and 1)
# Lowercase letters of the Latin, Greek and Cyrillic blocks: a word beginning with one continues the sentence.
LOWER_RANGES = ((0x61, 0x7B), (0xDF, 0x100), (0x100, 0x250), (0x3AC, 0x3D0), (0x430, 0x460), (0x1E00, 0x1F00))
OPSET = 17


def check_onnx():
    try:
        import onnx
    except ImportError:
        raise MtError(
            "--format argos builds the package's sentence splitter with the onnx package: pip install onnx "
            "(in mt's checkout: pip install -e '.[argos]')"
        ) from None
    return onnx


def units() -> list[str]:
    """The splitter's vocabulary, id order: MiniSBD's two specials, the space, the punctuation of the
    rule and the lowercase letters; any other character is <UNK> (id 1)."""
    lower = [chr(c) for lo, hi in LOWER_RANGES for c in range(lo, hi) if chr(c).islower() and len(chr(c)) == 1]
    return [*SPECIALS, " ", *TERMINALS, *ALWAYS, *CLOSERS, *DIGITS, *dict.fromkeys(lower)]


def _table(vocab: list[str], chars: str | set[str]) -> list[float]:
    return [1.0 if unit in chars else 0.0 for unit in vocab]


def model_bytes(lang: str) -> bytes:
    """The ONNX file MiniSBD loads as the splitter for `lang` (the language is only recorded)."""
    onnx = check_onnx()
    from onnx import TensorProto, helper

    vocab = units()
    lower = {u for u in vocab[len(SPECIALS) :] if u.islower()}
    ordinals = lang.replace("_", "-").split("-")[0].lower() in ORDINAL_DOT
    tables = {"terminal": _table(vocab, TERMINALS), "always": _table(vocab, ALWAYS), "closer": _table(vocab, CLOSERS),
              "space": _table(vocab, " "), "lower": _table(vocab, lower), "stop": _table(vocab, "."),
              "digit": _table(vocab, DIGITS if ordinals else "")}  # fmt: skip
    inits = [helper.make_tensor(name, TensorProto.FLOAT, [len(vocab)], values) for name, values in tables.items()]
    inits += [
        helper.make_tensor(name, TensorProto.INT64, [len(values)], values)
        for name, values in {"one": [1], "two": [2], "zero": [0], "big": [1 << 62], "minus_one": [-1], "axis1": [1],
                             "axis2": [2], "left1": [0, 0, 0, 1], "left2": [0, 0, 0, 2], "right1": [0, 1, 0, 0],
                             "right2": [0, 2, 0, 0], "right3": [0, 3, 0, 0], "minus_two": [-2], "minus_three": [-3]
                             }.items()
    ]  # fmt: skip
    inits += [
        helper.make_tensor(name, TensorProto.FLOAT, [], [value])
        for name, value in (("half", 0.5), ("x2", 2.0), ("one_f", 1.0), ("zero_f", 0.0))
    ]
    nodes = _nodes(helper, list(tables))
    graph = helper.make_graph(
        nodes,
        "mt_rule_sentence_splitter",
        [
            helper.make_tensor_value_info("units", TensorProto.INT64, ["batch_size", "length"]),
            helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch_size", "length", 1]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch_size", "length", 3])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mt export")
    model.ir_version = 8  # what onnxruntime releases since 1.11 read
    for key, value in _metadata(lang, vocab).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, json.dumps(value)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _nodes(helper, tables: list[str]) -> list:
    """The graph: per character, the class scores of the rule (module docstring) from its neighbours."""
    nodes = [helper.make_node("Gather", [name, "units"], [f"{name}_at"]) for name in tables]
    # the next character and the one after it (0 past the end), the previous ones
    nodes += _shifted(helper, "space", 1, "space_next") + _shifted(helper, "lower", 2, "lower_next2")
    nodes += _shifted(helper, "terminal", -1, "terminal_prev")
    nodes += [digit for by in (1, 2, 3) for digit in _shifted(helper, "digit", -by, f"digit_prev{by}")]
    nodes += _shifted(helper, "closer", 1, "closer_next") + _shifted(helper, "always", -1, "always_prev")
    nodes += [
        # a terminal, or a closer right after one; then whitespace, then no lowercase letter
        helper.make_node("Mul", ["closer_at", "terminal_prev"], ["closed"]),
        helper.make_node("Max", ["terminal_at", "closed"], ["ending"]),
        helper.make_node("Mul", ["ending", "space_next"], ["spaced"]),
        helper.make_node("Sub", ["one_f", "lower_next2"], ["not_lower"]),
        helper.make_node("Mul", ["spaced", "not_lower"], ["ends_any"]),
        # an ordinal's stop (ORDINAL_DOT; else the digit table is all 0): a stop after one or two digits
        helper.make_node("Mul", ["digit_prev2", "digit_prev3"], ["three_digits"]),
        helper.make_node("Sub", ["one_f", "three_digits"], ["not_three"]),
        helper.make_node("Mul", ["digit_prev1", "not_three"], ["short_number"]),
        helper.make_node("Mul", ["stop_at", "short_number"], ["ordinal"]),
        helper.make_node("Sub", ["one_f", "ordinal"], ["not_ordinal"]),
        helper.make_node("Mul", ["ends_any", "not_ordinal"], ["ends_rule"]),
        # after 。！？: there, unless a closer follows; then after that closer
        helper.make_node("Sub", ["one_f", "closer_next"], ["not_closed"]),
        helper.make_node("Mul", ["always_at", "not_closed"], ["always_end"]),
        helper.make_node("Mul", ["closer_at", "always_prev"], ["closer_end"]),
        helper.make_node("Max", ["ends_rule", "always_end", "closer_end"], ["ends"]),
        # class scores: 0.5 inside a token, 1 where a space follows (a token ends), 2 where a sentence ends
        helper.make_node("ReduceSum", ["features", "axis2"], ["feature_sum"], keepdims=0),
        helper.make_node("Mul", ["feature_sum", "zero_f"], ["zeros"]),
        helper.make_node("Add", ["zeros", "half"], ["score0"]),
        helper.make_node("Mul", ["ends", "x2"], ["score2"]),
        helper.make_node("Unsqueeze", ["score0", "axis2"], ["s0"]),
        helper.make_node("Unsqueeze", ["space_next", "axis2"], ["s1"]),
        helper.make_node("Unsqueeze", ["score2", "axis2"], ["s2"]),
        helper.make_node("Concat", ["s0", "s1", "s2"], ["output"], axis=2),
    ]
    return nodes


def _shifted(helper, table: str, by: int, out: str) -> list:
    """Two nodes: `out` is `table`'s value of the character `by` places after each one (before, where
    negative), 0 past the text's ends: padded on the other side, then cut."""
    if by > 0:
        pad, start, end = f"left{by}", {1: "one", 2: "two"}[by], "big"
    else:
        pad, start, end = f"right{-by}", "zero", {1: "minus_one", 2: "minus_two", 3: "minus_three"}[-by]
    return [
        helper.make_node("Pad", [f"{table}_at", pad], [f"{out}_pad"]),
        helper.make_node("Slice", [f"{out}_pad", start, end, "axis1"], [out]),
    ]


def _metadata(lang: str, vocab: list[str]) -> dict:
    """What MiniSBD reads from the file's metadata (each value JSON): its tokenizer config and vocabulary."""
    config = {"skip_newline": False, "max_seqlen": 1000, "no_ssplit": False, "batch_size": 32,
              "feat_funcs": ["space_before"], "use_dictionary": False, "num_dict_feat": 0}  # fmt: skip
    state = {"lang": lang, "idx": 0, "cutoff": 0, "lower": False, "_unit2id": {u: i for i, u in enumerate(vocab)},
             "_id2unit": vocab}  # fmt: skip
    return {"lang_code": lang, "config": config, "vocab": state, "lexicon": None}
