"""`mt export --format huggingface`: a checkpoint as a transformers `MarianMTModel` directory that
`AutoModelForSeq2SeqLM` and `AutoTokenizer` load, the Hub hosts, and Optimum turns into ONNX.

Why Marian: of the encoder-decoder architectures in transformers it is the one that computes the
paper's post-norm Transformer as mt does -- residual then LayerNorm in every sub-layer, no LayerNorm
on the embeddings or after the stacks, token embeddings times sqrt(d_model) (`scale_embedding`),
sinusoids from position 0 with the paper's frequencies, ReLU (`activation_function`), tied or untied
embeddings, one vocabulary or two. Two differences are bridged exactly:
- Marian lays the sinusoids out as [sin | cos] where mt interleaves them (PE[:, 2i] = sin,
  PE[:, 2i+1] = cos), and it computes its own table instead of loading one. Permuting the model
  dimension -- channel 2i to i, 2i+1 to d/2 + i -- in every weight that reads or writes the residual
  stream turns one layout into the other; LayerNorm, attention and the FFN do not depend on the
  order of channels, so the permuted model computes the same function.
- mt's search never emits <pad> or <s>: generation_config.json suppresses both, as mt does after the
  softmax.
Pre-norm models are refused: no architecture in transformers is mt's pre-norm Transformer (MBart adds
a LayerNorm on the embeddings, M2M100 and FSMT use fairseq's sinusoids). Every export is checked
before anything is written: the transformers model must give mt's log-probabilities on a batch.

The tokenizer is transformers' `MarianTokenizer` over mt's SentencePiece model(s): it gives mt's ids
for the same text and appends </s> as mt does. A multilingual model's target-language tokens (<2de>)
are named >>de<< in its vocabulary, the OPUS-MT convention that MarianTokenizer reads at the start
of a source: ">>de<< Hello" asks for German.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

import torch

from mt import log
from mt.apps.export.exported import Exported
from mt.apps.export.model_card import model_card
from mt.config.schema import ExperimentConfig
from mt.errors import ConfigError, MtError
from mt.model.mapping import Weights, check_exportable, layer_norm_epsilon
from mt.model.transformer import Transformer
from mt.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer, language_tag

MARIAN_LAYER_NORM_EPS = 1e-5  # nn.LayerNorm's default, which Marian's layers use and do not configure
SELF_CHECK_TOLERANCE = 1e-3  # largest log-probability difference the export accepts (fp32: about 1e-6)
NEVER_GENERATED = -1e4  # the logit bias of padding rows: exp(-1e4) is 0 in every precision
LICENSE = re.compile(r"[a-z0-9][a-z0-9.+-]*")  # a Hub licence identifier: apache-2.0, cc-by-4.0, other


def _transformers():
    try:
        import transformers
    except ImportError:
        raise MtError(
            "--format huggingface needs the transformers package: pip install 'transformers>=4.46' "
            "safetensors (in mt's checkout: pip install -e '.[huggingface]')"
        ) from None
    return transformers


def check_options(quantize: str | None, license: str | None) -> None:
    if quantize is not None:
        raise ConfigError(
            "--quantize is for --format ctranslate2 or argos: a Hugging Face export keeps float32 weights "
            "(transformers and onnxruntime quantize when loading)"
        )
    if license is not None and not LICENSE.fullmatch(license):
        raise ConfigError(f"--license {license!r}: a licence identifier of the Hub, e.g. apache-2.0, cc-by-4.0, other")
    _transformers()


def check_model(model_config: dict[str, Any], where: str) -> None:
    check_exportable(model_config, where, "Hugging Face")
    if model_config.get("pre_norm"):
        raise MtError(
            f"{where}: model.pre_norm is true: no transformers architecture computes mt's pre-norm "
            f"Transformer exactly (MarianMT is post-norm), so nothing was written; --format ctranslate2 "
            f"exports it"
        )
    if int(model_config.get("d_model", 2)) % 2:
        raise MtError(
            f"{where}: model.d_model = {model_config['d_model']} is odd: Marian's sinusoids need an "
            f"even model dimension"
        )


def channel_order(d_model: int) -> torch.Tensor:
    """Marian's channel k holds mt's channel order[k]: the sines' channels, then the cosines'."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def vocab_rows(model: Transformer) -> int:
    """Rows of every Marian embedding: the larger vocabulary's size. transformers before 5 gives the
    decoder the encoder's vocabulary size whatever decoder_vocab_size says, so two vocabularies of
    different sizes are both padded to the larger (rows no tokenizer id reaches, and target rows
    whose logit final_logits_bias puts at -1e4: never generated, out of the softmax)."""
    return max(model.src_embed.tokens.num_embeddings, model.tgt_embed.tokens.num_embeddings)


def marian_config(model: Transformer, dropouts: dict[str, float]):
    """The MarianConfig of `model`: its sizes, mt's special ids, and how its embeddings are shared."""
    transformers = _transformers()
    layer = model.encoder[0]
    shared = model.src_embed.tokens is model.tgt_embed.tokens  # one matrix for both sides (and the output)
    return transformers.MarianConfig(
        vocab_size=vocab_rows(model),
        decoder_vocab_size=vocab_rows(model),
        d_model=model.d_model,
        encoder_layers=len(model.encoder),
        decoder_layers=len(model.decoder),
        encoder_ffn_dim=layer.ffn.w1.out_features,
        decoder_ffn_dim=model.decoder[0].ffn.w1.out_features,
        encoder_attention_heads=layer.self_attn.n_heads,
        decoder_attention_heads=model.decoder[0].self_attn.n_heads,
        max_position_embeddings=model.max_positions,
        activation_function="relu",
        scale_embedding=True,
        share_encoder_decoder_embeddings=shared,
        tie_word_embeddings=model.output.weight is model.tgt_embed.tokens.weight,
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
        bos_token_id=BOS_ID,
        decoder_start_token_id=BOS_ID,
        forced_eos_token_id=None,  # a generation setting: generation_config.json holds it
        architectures=["MarianMTModel"],
        **dropouts,
    )


def marian_state(model: Transformer, names: list[str]) -> dict[str, torch.Tensor]:
    """mt's weights under Marian's names (`names`: those of the MarianMTModel to fill), the residual
    stream's channels in Marian's order; positions and final_logits_bias are Marian's own."""
    order = channel_order(model.d_model)
    weights = Weights(model)
    state: dict[str, torch.Tensor] = {}

    def linear(
        marian: str, mt: str, rows: slice | None = None, permute_in: bool = False, permute_out: bool = False
    ) -> None:
        weight, bias = weights.tensor(f"{mt}.weight"), weights.tensor(f"{mt}.bias")
        if rows is not None:  # one projection out of mt's fused [q; k; v] or [k; v]
            weight, bias = weight[rows], bias[rows]
        if permute_in:
            weight = weight[:, order]
        if permute_out:
            weight, bias = weight[order], bias[order]
        state[f"{marian}.weight"], state[f"{marian}.bias"] = weight, bias

    def norm(marian: str, mt: str) -> None:
        state[f"{marian}.weight"] = weights.tensor(f"{mt}.weight")[order]
        state[f"{marian}.bias"] = weights.tensor(f"{mt}.bias")[order]

    def attention(marian: str, mt: str, self_attention: bool) -> None:
        d = model.d_model  # mt's fused projections hold [q; k; v] (self) or [k; v] (cross), d rows each
        fused = "qkv" if self_attention else "kv"
        if not self_attention:
            linear(f"{marian}.q_proj", f"{mt}.q", permute_in=True)
        for j, name in enumerate(fused):
            linear(f"{marian}.{name}_proj", f"{mt}.{fused}", rows=slice(j * d, (j + 1) * d), permute_in=True)
        linear(f"{marian}.out_proj", f"{mt}.out", permute_out=True)

    def ffn(marian: str, mt: str) -> None:
        linear(f"{marian}.fc1", f"{mt}.w1", permute_in=True)
        linear(f"{marian}.fc2", f"{mt}.w2", permute_out=True)

    for i in range(len(model.encoder)):
        mine, theirs = f"encoder.{i}", f"model.encoder.layers.{i}"
        attention(f"{theirs}.self_attn", f"{mine}.self_attn", self_attention=True)
        norm(f"{theirs}.self_attn_layer_norm", f"{mine}.attn_block.norm")
        ffn(theirs, f"{mine}.ffn")
        norm(f"{theirs}.final_layer_norm", f"{mine}.ffn_block.norm")
    for i in range(len(model.decoder)):
        mine, theirs = f"decoder.{i}", f"model.decoder.layers.{i}"
        attention(f"{theirs}.self_attn", f"{mine}.self_attn", self_attention=True)
        norm(f"{theirs}.self_attn_layer_norm", f"{mine}.self_block.norm")
        attention(f"{theirs}.encoder_attn", f"{mine}.cross_attn", self_attention=False)
        norm(f"{theirs}.encoder_attn_layer_norm", f"{mine}.cross_block.norm")
        ffn(theirs, f"{mine}.ffn")
        norm(f"{theirs}.final_layer_norm", f"{mine}.ffn_block.norm")
    state.update(_embeddings(model, weights, order, "model.shared.weight" in names))
    if weights.left():
        raise MtError(f"the Hugging Face export does not map {', '.join(weights.left())}; nothing written")
    unknown = sorted(set(state) - set(names))
    if unknown:
        raise MtError(f"this transformers' MarianMTModel has no {', '.join(unknown)}; nothing written")
    return state


def _embeddings(model: Transformer, weights: Weights, order: torch.Tensor, shared: bool) -> dict[str, torch.Tensor]:
    """The token embeddings and the output projection, channels permuted, rows padded to vocab_rows."""
    rows = vocab_rows(model)
    src, tgt, out = (
        _pad_rows(weights.tensor(f"{n}.weight")[:, order], rows)
        for n in ("src_embed.tokens", "tgt_embed.tokens", "output")
    )
    state = {"model.encoder.embed_tokens.weight": src, "model.decoder.embed_tokens.weight": tgt, "lm_head.weight": out}
    if shared:
        state["model.shared.weight"] = src
    return state


def _pad_rows(matrix: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.cat([matrix, matrix.new_zeros(rows - matrix.size(0), matrix.size(1))])


def to_marian(model: Transformer, dropouts: dict[str, float] | None = None):
    """A transformers MarianMTModel (eval mode, float32) that computes what `model` computes."""
    transformers = _transformers()
    if layer_norm_epsilon(model, "Marian") != MARIAN_LAYER_NORM_EPS:
        raise MtError(f"LayerNorm epsilon {layer_norm_epsilon(model, 'Marian')}: Marian's is {MARIAN_LAYER_NORM_EPS}")
    torch.manual_seed(0)  # Marian's initial weights, all replaced: only so that the export is repeatable
    marian = transformers.MarianMTModel(marian_config(model, dropouts or {})).eval()
    own = marian.state_dict()
    state = marian_state(model, list(own))
    order = channel_order(model.d_model)
    for side in ("encoder", "decoder"):  # Marian's own sinusoids must be mt's, channels reordered
        name = f"model.{side}.embed_positions.weight"
        theirs, mine = own[name], getattr(model, "src_embed" if side == "encoder" else "tgt_embed").positions
        if theirs.shape != mine.shape or not torch.allclose(theirs, mine[:, order], atol=1e-5):
            raise MtError(f"this transformers' Marian sinusoids differ from mt's ({name}); nothing written")
        state[name] = theirs
    state["final_logits_bias"] = torch.zeros_like(own["final_logits_bias"])
    state["final_logits_bias"][:, model.tgt_embed.tokens.num_embeddings :] = NEVER_GENERATED  # padding rows
    missing = sorted(set(own) - set(state))
    if missing:
        raise MtError(f"the Hugging Face export leaves {', '.join(missing)} unset; nothing written")
    marian.load_state_dict(state, strict=True)
    return marian


@torch.no_grad()
def self_check(model: Transformer, marian, seed: int = 0) -> float:
    """The largest difference between mt's and Marian's log-probabilities on a padded batch of random
    sources and targets; refuses the export above SELF_CHECK_TOLERANCE."""
    gen = torch.Generator().manual_seed(seed)
    src_vocab, tgt_vocab = model.src_embed.tokens.num_embeddings, model.tgt_embed.tokens.num_embeddings
    lengths = [min(model.max_positions - 1, n) for n in (9, 4, 1)]
    src = torch.full((len(lengths), max(lengths) + 1), PAD_ID)
    tgt = torch.full((len(lengths), max(lengths)), PAD_ID)
    for row, n in enumerate(lengths):
        src[row, :n] = torch.randint(4, src_vocab, (n,), generator=gen)
        src[row, n] = EOS_ID
        tgt[row, 0] = BOS_ID
        tgt[row, 1:n] = torch.randint(4, tgt_vocab, (n - 1,), generator=gen)
    mine = model(src, tgt).log_softmax(-1)
    theirs = marian(input_ids=src, attention_mask=src != PAD_ID, decoder_input_ids=tgt).logits.log_softmax(-1)
    real = torch.arange(tgt.size(1))[None, :] < torch.tensor(lengths)[:, None]  # positions of real target tokens
    gap = float((mine - theirs[..., :tgt_vocab]).abs()[real].max())  # theirs: padded to the larger vocabulary
    if not gap <= SELF_CHECK_TOLERANCE:
        raise MtError(
            f"the exported model's log-probabilities differ from mt's by {gap:.2g} (more than "
            f"{SELF_CHECK_TOLERANCE:g}); nothing written"
        )
    return gap


def generation_config(cfg: ExperimentConfig, max_positions: int):
    """generation_config.json: mt's search as transformers' generate() has it (the model card says
    where it cannot)."""
    return _transformers().GenerationConfig(**generation_settings(cfg, max_positions))


def generation_settings(cfg: ExperimentConfig, max_positions: int) -> dict[str, Any]:
    """mt's search as generate()'s arguments. decode.stop exact has no equivalent: "never" searches
    on to max_length (1,024 tokens) at every call, where mt stops at its length limit; False, a bound
    on what a beam can still reach, is transformers' nearest (the model card says so)."""
    d = cfg.decode
    beam = {}  # transformers refuses to save beam settings beside num_beams=1
    if d.beam > 1:
        beam = {
            "length_penalty": 0.0 if d.length_penalty == "none" else d.alpha,
            "early_stopping": d.stop == "early",
        }
    return dict(
        num_beams=d.beam,
        max_length=max_positions,
        suppress_tokens=[PAD_ID, BOS_ID],
        decoder_start_token_id=BOS_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        forced_eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        # mt's repetition guard; generate() bans the n-grams after normalising (mt before), so its
        # beams may still differ where the guard acts (the model card says so)
        **({"no_repeat_ngram_size": d.no_repeat_ngram} if d.no_repeat_ngram else {}),
        **beam,
    )


def vocabulary(tokenizer: Tokenizer, languages: list[str]) -> dict[str, int]:
    """Piece -> id, the target-language tokens of `languages` renamed >>lang<<."""
    pieces = tokenizer.pieces(list(range(tokenizer.vocab_size)))
    if len(set(pieces)) != len(pieces):
        raise MtError("a vocabulary holds the same piece twice: MarianTokenizer looks tokens up by piece")
    renamed = {language_tag(lang): f">>{lang}<<" for lang in languages}
    vocab = {renamed.get(piece, piece): i for i, piece in enumerate(pieces)}
    if len(vocab) != len(pieces):
        raise MtError("a vocabulary holds a piece like >>xx<< besides the target-language tokens")
    return vocab


def write_tokenizer(directory: Path, source: Exported) -> None:
    """MarianTokenizer's files: source.spm/target.spm, vocab.json (and target_vocab.json for two
    vocabularies), written through MarianTokenizer itself so that its own loader reads them back."""
    transformers = _transformers()
    cfg = source.cfg
    languages = cfg.data.languages() if cfg.data.multilingual else []
    (directory / "source.spm").write_bytes(source.src_tok.proto)
    (directory / "target.spm").write_bytes(source.tgt_tok.proto)
    # ASCII JSON: MarianTokenizer reads vocab.json in the locale's encoding, which may not be UTF-8.
    (directory / "vocab.json").write_text(
        json.dumps(vocabulary(source.src_tok, languages), ensure_ascii=True), encoding="utf-8"
    )
    pieces = source.tgt_tok.pieces([PAD_ID, UNK_ID, EOS_ID])
    if source.src_tok.pieces([PAD_ID, UNK_ID, EOS_ID]) != pieces:
        raise MtError(
            "the <pad>, <unk> and </s> pieces differ between the vocabularies: MarianTokenizer has one of each"
        )
    extra = {}
    if not source.joint:
        (directory / "target_vocab.json").write_text(
            json.dumps(vocabulary(source.tgt_tok, []), ensure_ascii=True), encoding="utf-8"
        )
        extra = {"target_vocab_file": str(directory / "target_vocab.json"), "separate_vocabs": True}
    tokenizer = transformers.MarianTokenizer(
        source_spm=str(directory / "source.spm"),
        target_spm=str(directory / "target.spm"),
        vocab=str(directory / "vocab.json"),
        source_lang=None if languages else cfg.data.src_lang,
        target_lang=None if languages else cfg.data.tgt_lang,
        pad_token=pieces[0],
        unk_token=pieces[1],
        eos_token=pieces[2],
        model_max_length=source.model.max_positions,
        split_special_tokens=True,  # "</s>" in a source is text to mt, not the end of the sentence
        **extra,
    )
    tokenizer.save_pretrained(str(directory))


def writer(source: Exported, quantize: str | None = None, license: str | None = None) -> Callable[[Path], None]:
    """What `mt export --format huggingface` writes: config.json, model.safetensors,
    generation_config.json, the tokenizer's files and README.md (the model card)."""
    cfg = source.cfg
    dropouts = {k: cfg.model.__dict__[k] for k in ("dropout", "attention_dropout", "activation_dropout")}
    marian = to_marian(source.model, dropouts)
    gap = self_check(source.model, marian)
    d = cfg.decode
    if d.beam > 1 and d.length_penalty == "gnmt":  # said where it is written, not in the card alone
        log.warn(
            f"transformers has no GNMT length penalty: generate() ranks the beam by |Y|^{d.alpha:g}, as "
            "`mt translate --length-penalty length` does (`mt evaluate --length-penalty length` scores it)"
        )
    if d.shortlist:
        log.warn("the export scores the whole vocabulary: decode.shortlist is mt's, as `mt translate --no-shortlist`")

    def write(directory: Path) -> None:
        marian.generation_config = generation_config(cfg, source.model.max_positions)
        # transformers' translation pipeline (and the Hub's widget) sets its own num_beams=4 over a
        # generation_config whose values are transformers' defaults (beam 1, a penalty of 1.0); the
        # task's parameters in config.json come before it
        search = generation_settings(cfg, source.model.max_positions)
        task = {k: search[k] for k in ("num_beams", "length_penalty", "early_stopping", "max_length") if k in search}
        # (`pipeline("translation_de_to_en")` reads its own task's name)
        names = ["translation"] + [f"translation_{src}_to_{tgt}" for src, tgt in cfg.data.pairs()]
        marian.config.task_specific_params = {name: task for name in names}
        marian.save_pretrained(str(directory), safe_serialization=True)
        write_tokenizer(directory, source)
        (directory / "README.md").write_text(model_card(source, license or "unknown", gap), encoding="utf-8")

    return write
