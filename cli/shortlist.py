"""`mt shortlist`: the lexical shortlist of an experiment, learnt from its training split."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mt.errors import MtError

from .options import Exp, Sets, examples

EXAMPLES = examples(
    "mt shortlist --exp exp/de-en",
    "mt shortlist --exp exp/de-en --top 30 --frequent 200 --force",
    "mt translate --exp exp/de-en --shortlist --input news.de",
)


def shortlist(
    exp: Exp,
    top: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            metavar="K",
            help="Candidates per source token, its most probable translations (decode.shortlist_top).",
        ),
    ] = None,
    frequent: Annotated[
        Optional[int],
        typer.Option(
            min=0,
            metavar="N",
            help="The most frequent target tokens, candidates of every sentence (decode.shortlist_frequent).",
        ),
    ] = None,
    sets: Sets = None,
    force: Annotated[bool, typer.Option(help="Build it again although EXP/shortlist holds one.")] = False,
) -> None:
    """Learn which target tokens each source token may translate into (IBM Model 1 on the binarized
    training split) and save them in EXP/shortlist, for decoding with --shortlist (decode.shortlist)
    and for `mt export --format ctranslate2` (its vmap.txt)."""
    from mt import log
    from mt.data.shortlist import build_shortlist, stale_reason
    from mt.experiment.config import open_experiment

    flags = {"decode.shortlist_top": top, "decode.shortlist_frequent": frequent}
    experiment, cfg, change = open_experiment(exp, flags=flags, sets=sets)
    with change.undo_if_fails():
        reason = stale_reason(experiment, cfg)
        if reason is None and not force:
            log.info(f"shortlist: up to date ({experiment.shortlist_path}); --force builds it again")
        elif reason != "not built" and not force:
            raise MtError(f"{experiment.shortlist_path}: exists ({reason}); add --force to build it again")
        else:
            src_tok, tgt_tok = experiment.load_tokenizers(cfg.tokenizer.joint)
            table = build_shortlist(experiment, cfg, src_tok.vocab_size, tgt_tok.vocab_size)
            rows = (table.candidates >= 0).sum(axis=1)
            log.info(
                f"shortlist: {int((rows > 0).sum()):,} source tokens with candidates, "
                f"{rows[rows > 0].mean():.1f} each on average; {len(table.frequent)} frequent"
            )
    print(experiment.shortlist_path)
