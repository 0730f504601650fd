"""SentencePiece training and loading: fixed special ids, round trips, byte fallback, clean errors."""

import hashlib
import itertools
import random

import pytest

from mt.config.schema import DataConfig, ExperimentConfig, TokenizerConfig
from mt.data.train_tokenizer import train_spm, train_tokenizer
from mt.errors import MtError
from mt.experiment.paths import Experiment
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer, model_path

SUBJECTS = [("Ein Mann", "A man"), ("Eine Frau", "A woman"), ("Ein kleines Mädchen", "A little girl"),
            ("Ein Junge", "A boy"), ("Ein älterer Herr", "An older gentleman"), ("Ein Hund", "A dog"),
            ("Ein Radfahrer", "A cyclist"), ("Eine Musikerin", "A musician")]
CLOTHES = [("mit einem roten Hemd", "in a red shirt"), ("mit blauer Jacke", "in a blue jacket"),
           ("mit einem gelben Hut", "with a yellow hat"), ("mit Sonnenbrille", "with sunglasses"), ("", "")]
VERBS = [("läuft", "walks"), ("sitzt", "sits"), ("wartet", "waits"), ("spielt", "plays"),
         ("steht", "stands"), ("schläft", "sleeps"), ("tanzt", "dances")]
PLACES = [("auf der Straße", "on the street"), ("im Park", "in the park"), ("am Strand", "on the beach"),
          ("vor einem Geschäft", "in front of a shop"), ("neben dem Brunnen", "next to the fountain"),
          ("unter einem großen Baum", "under a big tree"), ("in der Küche", "in the kitchen"),
          ("auf einer Bühne", "on a stage")]
VOCAB = 320  # this corpus allows about 300 (characters + 256 bytes) to 380 pieces


def sentence_pairs(n: int = 400, seed: int = 0) -> tuple[list[str], list[str]]:
    """German/English pairs like Multi30k captions, from word lists."""
    combos = list(itertools.product(SUBJECTS, CLOTHES, VERBS, PLACES))
    random.Random(seed).shuffle(combos)
    src, tgt = [], []
    for parts in combos[:n]:
        src.append(" ".join(p[0] for p in parts if p[0]) + ".")
        tgt.append(" ".join(p[1] for p in parts if p[1]) + ".")
    return src, tgt


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    src, tgt = sentence_pairs()
    prefix = tmp_path_factory.mktemp("tok") / "spm"
    train_spm(src + tgt, prefix, TokenizerConfig(vocab_size=VOCAB))
    return Tokenizer.load(model_path(prefix))


def files_config(tmp_path, vocab_size=VOCAB, joint=True, byte_fallback=True) -> ExperimentConfig:
    src, tgt = sentence_pairs()
    (tmp_path / "train.de").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    return ExperimentConfig(
        data=DataConfig(train=[f"files:{tmp_path / 'train'}"]),
        tokenizer=TokenizerConfig(vocab_size=vocab_size, joint=joint, byte_fallback=byte_fallback),
    )


def test_special_ids_are_fixed(tokenizer):
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert tokenizer.pieces([PAD_ID, UNK_ID, BOS_ID, EOS_ID]) == ["<pad>", "<unk>", "<s>", "</s>"]
    assert tokenizer.vocab_size == VOCAB
    assert tokenizer.sha256 == hashlib.sha256(tokenizer.path.read_bytes()).hexdigest()


def test_encode_decode_round_trip(tokenizer):
    src, tgt = sentence_pairs(50, seed=1)
    ids = tokenizer.encode(src + tgt)
    assert all(seq and min(seq) > EOS_ID for seq in ids)  # no BOS/EOS/UNK added
    assert tokenizer.decode(ids) == src + tgt
    assert tokenizer.encode([""]) == [[]]
    assert tokenizer.decode([]) == []


def test_a_few_lines_one_at_a_time_are_what_the_batched_call_gives(tokenizer):
    """Fewer than BATCH_CALL_LINES lines go to SentencePiece one by one (its list call starts a thread pool)."""
    from mt.tokenizer import BATCH_CALL_LINES

    src, tgt = sentence_pairs(BATCH_CALL_LINES * 2, seed=3)
    lines = src + tgt + ["", "ünseen ✓ 字"]
    batched = tokenizer.encode(lines)
    assert [tokenizer.encode([line])[0] for line in lines] == batched
    assert tokenizer.encode(lines[:3]) == batched[:3]
    assert [tokenizer.decode([ids])[0] for ids in batched] == tokenizer.decode(batched)
    assert tokenizer.decode([[], [EOS_ID]]) == ["", ""]


def test_lines_of_short_calls_are_remembered_and_each_call_gets_its_own_lists(tokenizer):
    """Short calls' lines are kept (RECENT_LINES: `mt serve` encodes a sentence three times); a kept
    line gives what SentencePiece gives, in a list the caller may change, and more lines than are kept
    (or than RECENT_CHARS long) are encoded anew, the same."""
    from mt.tokenizer import RECENT_CHARS, RECENT_LINES

    src, _ = sentence_pairs(RECENT_LINES + 40, seed=5)
    long = " ".join(src[:40])
    assert len(long) > RECENT_CHARS
    fresh = Tokenizer(tokenizer.path, tokenizer.proto)
    expected = fresh.encode(src + [long])  # one batched call: nothing kept
    first = [fresh.encode([line])[0] for line in [*src, long]]
    assert first == expected and len(fresh._recent) <= RECENT_LINES and long not in fresh._recent
    kept = [line for line in src if line in fresh._recent]
    assert src[-1] in kept and len(kept) >= 40  # the latest lines are remembered
    given = fresh.encode([src[-1]])[0]  # from what is kept
    given.append(EOS_ID)  # the caller's list: what is kept does not change
    assert fresh.encode([src[-1]]) == [expected[-2]] and src[-1] in fresh._recent
    again = [fresh.encode([line])[0] for line in [*src, long]]
    assert again == expected
    assert fresh.encode([src[-1], src[-1]]) == [expected[-2], expected[-2]]


def test_decode_drops_special_ids(tokenizer):
    ids = tokenizer.encode(["Ein Hund spielt im Park."])[0]
    assert tokenizer.decode([[BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]]) == ["Ein Hund spielt im Park."]


def test_byte_fallback_keeps_unseen_characters(tokenizer):
    line = "Ein Schneemann ☃ steht vor dem Café."
    ids = tokenizer.encode([line])[0]
    assert UNK_ID not in ids
    assert any(piece.startswith("<0x") for piece in tokenizer.pieces(ids))
    assert tokenizer.decode([ids]) == [line]


def test_decode_drops_byte_pieces_that_form_no_character(tokenizer):
    """A sampled translation can stop a character halfway: no U+FFFD, the whole characters kept."""
    byte = {value: tokenizer.symbol_id(f"<0x{value:02X}>") for value in (0xE2, 0x98, 0x83, 0x41)}
    word = tokenizer.encode(["Hund"])[0]
    snowman = [byte[0xE2], byte[0x98], byte[0x83]]
    assert tokenizer.decode([word + snowman]) == ["Hund☃"]
    assert tokenizer.decode([word + snowman[:2]]) == ["Hund"]  # cut short
    assert tokenizer.decode([snowman[1:] + word]) == ["Hund"]  # continuation bytes without a lead
    assert tokenizer.decode([[byte[0xE2], byte[0x41], *snowman]]) == ["A☃"]  # a lead byte without its run


def test_decode_gives_one_line_whatever_byte_pieces_spell(tokenizer):
    """Sampling can draw <0x0A> (a newline), <0x09> (a tab) or <0x0C>: a translation stays one line
    and one TSV field (back-translation once got 19,004 lines for 19,000 inputs)."""
    word = tokenizer.encode(["Hund"])[0]
    for value in (0x0A, 0x0D, 0x09, 0x0C, 0x1E, 0x0B):
        piece = tokenizer.symbol_id(f"<0x{value:02X}>")
        (text,) = tokenizer.decode([word + [piece] + word])
        assert text == "Hund Hund", (value, text)
        assert tokenizer.decode([[piece] + word]) == ["Hund"]


def test_vocab_too_large_is_one_clean_error(tmp_path):
    src, tgt = sentence_pairs()
    with pytest.raises(MtError, match=r"--vocab-size 9000 is too large .* at most \d+") as info:
        train_spm(src + tgt, tmp_path / "spm", TokenizerConfig(vocab_size=9000))
    assert "\n" not in str(info.value)
    assert not list(tmp_path.glob("spm*"))
    with pytest.raises(MtError, match=r"--vocab-size 100 is too small .* at least \d+"):
        train_spm(src + tgt, tmp_path / "spm", TokenizerConfig(vocab_size=100))


def test_load_missing_or_corrupt_names_the_file(tmp_path):
    with pytest.raises(MtError, match="nope.model: tokenizer model not found"):
        Tokenizer.load(tmp_path / "nope.model")
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"not a protobuf")
    with pytest.raises(MtError, match="bad.model: not a SentencePiece model"):
        Tokenizer.load(bad)


def test_train_tokenizer_step_joint_and_refuses_overwrite(tmp_path):
    cfg = files_config(tmp_path)
    exp = Experiment(tmp_path / "exp")
    summary = train_tokenizer(exp, cfg)
    assert summary["vocab_size"] == {"joint": VOCAB}
    assert summary["sentences"] == {"src": 400, "tgt": 400}
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    assert src_tok is tgt_tok
    before = exp.spm_model_path("joint").read_bytes()
    with pytest.raises(MtError, match="already has a tokenizer; nothing overwritten"):
        train_tokenizer(exp, cfg)
    assert exp.spm_model_path("joint").read_bytes() == before
    assert not [p for p in exp.tokenizer_dir.iterdir() if p.name.startswith(".")]


def test_train_tokenizer_step_separate_vocabularies(tmp_path):
    cfg = files_config(tmp_path, vocab_size=60, joint=False, byte_fallback=False)
    exp = Experiment(tmp_path / "exp")
    assert train_tokenizer(exp, cfg)["vocab_size"] == {"src": 60, "tgt": 60}
    src_tok, tgt_tok = exp.load_tokenizers(cfg.tokenizer.joint)
    assert src_tok.path.name == "spm.src.model" and tgt_tok.path.name == "spm.tgt.model"
    assert src_tok.sha256 != tgt_tok.sha256


def test_a_side_that_fails_leaves_no_half_tokenizer(tmp_path):
    """The target side's vocabulary is too large for its text: the source side's model, trained
    first, is not written either (it made a half tokenizer that neither a second try nor binarize
    could use), and a smaller vocabulary then works."""
    cfg = files_config(tmp_path, vocab_size=70, joint=False, byte_fallback=False)
    (tmp_path / "train.en").write_text("\n".join((sentence_pairs()[1][:8] * 50)) + "\n", encoding="utf-8")  # few pieces
    exp = Experiment(tmp_path / "exp")
    with pytest.raises(MtError, match="too large for this corpus"):
        train_tokenizer(exp, cfg)
    assert not exp.has_tokenizer() and not [p for p in exp.tokenizer_dir.iterdir() if p.name.startswith("spm")]
    cfg.tokenizer.vocab_size = 45
    assert train_tokenizer(exp, cfg)["vocab_size"] == {"src": 45, "tgt": 45}


def test_load_tokenizers_without_model_points_to_train_tokenizer(tmp_path):
    with pytest.raises(MtError, match="mt train-tokenizer"):
        Experiment(tmp_path / "exp").load_tokenizers(True)


def test_train_tokenizer_reads_a_bounded_sample(tmp_path, monkeypatch):
    from mt.data import corpus

    cfg = files_config(tmp_path, vocab_size=100, byte_fallback=False)
    cfg.tokenizer.input_sentence_size = 300  # a joint model: 150 pairs, both sides
    monkeypatch.setattr(corpus, "load_split", None)  # the corpus is streamed, never loaded whole
    monkeypatch.setattr(corpus, "CHUNK_PAIRS", 64)
    summary = train_tokenizer(Experiment(tmp_path / "exp"), cfg)
    assert summary["sentences"] == {"src": 150, "tgt": 150}
    assert summary["pairs_read"] == 400


def test_identity_normalization_reads_and_writes_full_width_punctuation(tmp_path):
    """SentencePiece's default rule (nmt_nfkc) folds compatibility forms: a Chinese model could neither
    read nor write "，" or "！" (its output had ASCII punctuation); tokenizer.normalization: identity keeps them."""
    rng = random.Random(0)
    chars = "你好世界我们他是的人在有这个上中大为和国地到以说时要就出会可也"
    lines = ["".join(rng.choice(chars) for _ in range(rng.randint(4, 12))) + rng.choice("，！？：；") + "再见。"
             for _ in range(300)]
    text = ["你好，世界！", "我们？是的：再见。"]
    for rule, expected in (("nmt_nfkc", ["你好,世界!", "我们?是的:再见。"]), ("identity", text)):
        train_spm(lines, tmp_path / rule, TokenizerConfig(vocab_size=80, byte_fallback=False, normalization=rule))
        tok = Tokenizer.load(model_path(tmp_path / rule))
        assert tok.decode(tok.encode(text)) == expected, rule


def test_lines_longer_than_sentencepieces_default_limit_are_trained_on(tmp_path):
    """SentencePiece left out every sentence over 4,192 bytes, unsaid: the characters only the long
    lines have were then byte pieces."""
    short = [" ".join(random.Random(i).choice(["a", "b", "c", "d"]) * 3 for _ in range(6)) for i in range(200)]
    long = [" ".join(["XYZW QRST"] * 500) for _ in range(50)]  # 5,000 bytes each
    train_spm(short + long, tmp_path / "spm", TokenizerConfig(vocab_size=275, byte_fallback=True))
    tok = Tokenizer.load(model_path(tmp_path / "spm"))
    assert not any(piece.startswith("<0x") for piece in tok.pieces(tok.encode(["XYZW QRST"])[0]))


def test_two_trainings_alike_write_the_same_bytes(tmp_path):
    """The model kept its temporary directory's random name (trainer_spec.model_prefix): tokenizers of
    one vocabulary had other sha256s, and averaging or --init-from across them was refused."""
    cfg = files_config(tmp_path)
    digests = []
    for name in ("a", "b"):
        exp = Experiment(tmp_path / name)
        train_tokenizer(exp, cfg)
        digests.append(hashlib.sha256(exp.spm_model_path("joint").read_bytes()).hexdigest())
        assert Tokenizer.load(exp.spm_model_path("joint")).encode(["Ein Hund läuft."])[0]
    assert digests[0] == digests[1]
