"""Texts translated sentence by sentence (mt.text.translate) on conftest's tiny trained experiment:
a paragraph's sentences all come back, as each alone gives it, between the source's own spaces; one
output line per input line; --no-split-sentences; a long line translated in bounded pieces."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from helpers import toy_corpus

from mt.decoding.options import DecodeOptions
from mt.decoding.translator import Translator
from mt.text.translate import search, segment, translate

S1, S2, S3 = toy_corpus(3, seed=11)[0]


def mt_translate(exp, stdin: str, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mt", "translate", "--exp", str(exp.root), "--threads", "1", *flags],
        input=stdin.encode(),
        capture_output=True,
        env=env,
        timeout=300,
    )


def test_a_paragraphs_sentences_are_each_translated_as_alone(trained_experiment):
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    t1, t2, t3 = translator.translate([S1, S2, S3])
    assert translate(translator, [f"{S1} {S2}\t {S3}"]) == [f"{t1} {t2}\t {t3}"]
    whole = translator.translate([f"{S1} {S2} {S3}"])[0]
    assert translate(translator, [f"{S1} {S2} {S3}"], DecodeOptions(sentences=False)) == [whole]


def test_mt_translate_splits_lines_keeps_their_spaces_and_one_line_per_line(trained_experiment):
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    t1, t2, t3 = translator.translate([S1, S2, S3])
    # a line of spaces and tabs alone comes back as it is (was emptied: its whitespace lost)
    done = mt_translate(trained_experiment, f"{S1} {S2}  {S3}\n\n  {S2}\n \t \n{S3}\n")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split("\n") == [f"{t1} {t2}  {t3}", "", f"  {t2}", " \t ", t3, ""]


def test_a_break_between_two_sentences_of_a_line_is_a_space_in_its_translation(trained_experiment):
    """A lone CR (or a form feed, U+2028) between sentences was copied into the output line, which
    Python's readers then split in two."""
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    t1, t2 = translator.translate([S1, S2])
    done = mt_translate(trained_experiment, f"{S1}\r{S2}\n{S1}\u2028{S2}\x0c\n")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode("utf-8").splitlines() == [f"{t1} {t2}", f"{t1} {t2} "]  # the form feed's place kept


def test_no_split_sentences_translates_each_line_whole(trained_experiment):
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    whole = translator.translate([f"{S1} {S2} {S3}"])[0]
    done = mt_translate(trained_experiment, f"{S1} {S2} {S3}\n", "--no-split-sentences")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == whole + "\n"


def test_nbest_keeps_each_line_one_segment(trained_experiment):
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    line = f"{S1} {S2}"
    options = DecodeOptions(nbest=2)
    assert search(translator, [line], options) == translator.search([line], options)
    # --nbest 1 too: a list of one hypothesis of the whole line (was its sentences' joined, with their
    # mean score: no hypothesis of the line at all)
    (best,) = translator.search([line], DecodeOptions(nbest=1))
    done = mt_translate(trained_experiment, line + "\n", "--nbest", "1")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split("\t")[1:] == [f"{best[0][1]:.4f}", best[0][0] + "\n"]


def test_a_long_line_is_translated_in_bounded_pieces(trained_experiment):
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    translator.decode_cfg.beam = 1
    line = " ".join(toy_corpus(400, seed=3)[0]).replace(".", ",")  # ~2,400 words, no sentence end
    options = DecodeOptions(segment_tokens=40)
    (plan,) = segment(translator, [line], options)
    assert len(plan) > 20
    assert all(len(translator.src_tok.encode([line[a:b]])[0]) <= 40 for a, b in plan)
    start = time.perf_counter()
    (out,) = translate(translator, [line], options)
    assert time.perf_counter() - start < 60
    bound = len(plan) * (translator.decode_cfg.max_len_a * 40 + translator.decode_cfg.max_len_b)
    assert 0 < len(translator.tgt_tok.encode([out])[0]) <= bound


CJK = "我们今天去公园散步看见很多人在湖边钓鱼。"


def test_a_sentence_in_a_script_the_model_cannot_read_is_copied_with_a_warning(trained_experiment):
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    assert translator.src_tok.unknown_pieces(translator.src_tok.encode([CJK])[0]) >= 1  # <unk>: no byte fallback here
    t1, t3 = translator.translate([S1, S3])
    assert translate(translator, [f"{S1} {CJK} {S3}", CJK * 50]) == [f"{t1} {CJK} {t3}", CJK * 50]
    result = mt_translate(trained_experiment, f"{S1}\n{S1} {CJK}\n")
    assert result.returncode == 0
    assert result.stdout.decode().splitlines() == [t1, f"{t1} {CJK}"]
    warning = result.stderr.decode()  # (beside a sentence it reads: kept as it is, as an address is)
    letters = sum(c.isalpha() for c in CJK)
    assert f"input line 2: {letters} letters the model cannot read (not in its vocabulary) kept as they are" in warning
    assert "input line 1" not in warning
    alone = mt_translate(trained_experiment, f"{CJK}\n")  # a line of nothing else: copied, as a sentence was
    assert alone.stdout.decode() == f"{CJK}\n"
    assert f"input line 1: {len(CJK)} characters in a script the model cannot read" in alone.stderr.decode()


def test_emoji_beside_words_are_no_reason_to_copy_a_sentence(tmp_path):
    """With byte fallback an emoji is four byte pieces against a piece a word: "Love it 😍😍" was copied
    untranslated as "in a script the model cannot read". Counted in letters, a sentence with emoji is
    read, one of emoji alone copied, and one in a script the vocabulary lacks copied as before."""
    import sentencepiece as spm

    from mt.text.translate import unreadable
    from mt.tokenizer import Tokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(toy_corpus(300, seed=5)[0] + ["Love it. Great job. Thank you. Room 12 345."]) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "sp"), vocab_size=320,
                                   byte_fallback=True, pad_id=0, unk_id=1, bos_id=2, eos_id=3, minloglevel=2)
    tok = Tokenizer.load(tmp_path / "sp.model")
    assert tok.unknown_pieces(tok.encode(["Love it 😍😍"])[0]) * 2 >= len(tok.encode(["Love it 😍😍"])[0])
    found = unreadable(tok, ["Love it 😍😍", "Great job 👍", "😍😍 🙏", CJK, f"{S1} 🐶", "12 345"])
    assert found == {2: "😍😍 🙏", 3: CJK, 5: "12 345"}  # no letters: copied, as there is nothing to translate


def test_markup_copies_an_unreadable_sentence_with_its_tags(trained_experiment):
    from mt.text.markup_translate import translate as translate_markup

    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    (out,) = translate_markup(translator, [f"<p>{S1} <b>{CJK[:4]}</b>{CJK[4:]}</p>"], "html")
    # copied as it is: the tag goes round the same characters of it (it went round the whole space-less
    # word, as round any word translated otherwise)
    assert out == f"<p>{translator.translate([S1])[0]} <b>{CJK[:4]}</b>{CJK[4:]}</p>"


def test_markup_warns_of_what_it_copies_untranslated_as_plain_text_does(trained_experiment):
    """Was: `--format html` copied the unreadable sentence without a word on stderr."""
    result = mt_translate(trained_experiment, f"<p>{S1}</p>\n<p>{S1} <b>{CJK}</b></p>\n", "--format", "html")
    assert result.returncode == 0 and CJK in result.stdout.decode().splitlines()[1]
    warning = result.stderr.decode()
    letters = sum(c.isalpha() for c in CJK)
    assert f"input line 2: {letters} letters the model cannot read (not in its vocabulary) kept as they are" in warning
    assert "input line 1" not in warning


def test_zero_width_characters_alone_add_no_invented_sentence(trained_experiment):
    """A zero-width space or BOM after a sentence is a piece of its own for the splitter and nothing
    for the tokenizer (its normalisation removes it): searched from EOS alone, the model would add a
    sentence that is not in the input. Such a piece, without letters, is copied as it is."""
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    line = toy_corpus(1, seed=9)[0][0]
    alone = translate(translator, [line])[0]
    assert translate(translator, [f"{line} \u200b", "\u200b", "\ufeff \u200b"]) == [
        f"{alone} \u200b", "\u200b", "\ufeff \u200b"]
    assert translator.search(["\u200b"]) == translator.search([""])


def test_one_sentence_between_spaces_keeps_its_n_best_with_the_spaces():
    """A text of one sentence and a trailing space ("Hello world. ") was joined as a paragraph: one
    hypothesis, its alternatives (LibreTranslate's `alternatives`, /v1's nbest) gone."""
    from mt.text.translate import join

    found = [[("Hallo Welt.", -0.1), ("Hallo, Welt.", -0.5)]]
    assert join([" Hello world. "], [[(1, 13)]], found, None, DecodeOptions()) == [[(" Hallo Welt. ", -0.1), (" Hallo, Welt. ", -0.5)]]
    assert join(["Hello world."], [[(0, 12)]], found, None, DecodeOptions()) == found  # the whole text: as it was
    two = join(["A. B."], [[(0, 2), (3, 5)]], [[("X.", -1.0), ("Y.", -3.0)], [("Z.", -2.0)]], None, DecodeOptions())
    assert two == [[("X. Z.", -1.5)]]  # several pieces: the best of each, joined


def test_a_piece_without_letters_is_copied_and_a_tab_separates_pieces(trained_experiment, tmp_path):
    """Was: a list's number cut off its sentence ("1."), "42" or "12:45" alone, a rule of dashes were
    searched, and a model invents a sentence for them; and a tab inside a line joined the columns
    either side of it into one sentence (a row of a table pasted as text came back one cell)."""
    translator = Translator.load(trained_experiment, trained_experiment.load_config())
    t1, t2 = translator.translate([S1, S2])
    assert translate(translator, ["42", "12:45", "---", f"1. {S1}", f"{S1}\t{S2}", f"2)\t{S2}"]) == [
        "42", "12:45", "---", f"1. {t1}", f"{t1}\t{t2}", f"2)\t{t2}"]
    done = mt_translate(trained_experiment, "42\n")
    assert done.stdout.decode() == "42\n" and "warning" not in done.stderr.decode()  # nothing was left untranslated
    # each line whole (n-best lists, alignments): copied as well, where a model wrote "Runs the the the"
    from mt.text.translate import search

    layer = DecodeOptions(alignment_layer=0)
    assert search(translator, ["42", CJK, S1], layer)[:2] == [[("42", 0.0, "0-0")], [(CJK, 0.0, "0-0")]]
    assert [hyps[0][0] for hyps in search(translator, ["12:45", S1, "  \t"], DecodeOptions(nbest=2))] == ["12:45", t1, ""]
    aligned = mt_translate(trained_experiment, f"42\n{S1}\n", "--alignments")
    assert aligned.stdout.decode().splitlines()[0] == "42\t0-0"
