"""`mt run RECIPE`: the recipe's steps in order, each skipped when its output is already there."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from mt import config as cfglib
from mt import log
from mt.errors import ConfigError
from mt.experiment import Experiment


def run_recipe(
    recipe: Path,
    exp_dir: Path | None,
    overrides: dict[str, Any],
    device: str = "cpu",
    print_result: Callable[[str], None] = print,
) -> Experiment:
    """Resolve the recipe into its experiment, then train-tokenizer, binarize, train, evaluate."""
    from mt.binarize import binarize
    from mt.evaluate import evaluate_split
    from mt.tokenizer import train_tokenizer
    from mt.train import train
    from mt.translate import Translator
    from mt.corpus import has_split

    base, run = cfglib.load_recipe(recipe)
    exp_dir = exp_dir or (Path(run["exp"]) if "exp" in run else None)
    if exp_dir is None:
        raise ConfigError(f"{recipe}: no `exp:` directory in the recipe; give --exp")
    exp = Experiment(exp_dir)
    cfg = exp.resolve_config(overrides, base=base)
    for step in run.get("steps", list(cfglib.STEPS)):
        if step == "train-tokenizer":
            if exp.tokenizer_dir.exists():
                log.info(f"train-tokenizer: done already ({exp.tokenizer_dir})")
                continue
            log.info("[bold]train-tokenizer[/bold]")
            train_tokenizer(exp, cfg)
        elif step == "binarize":
            if exp.data_dir.exists():
                log.info(f"binarize: done already ({exp.data_dir})")
                continue
            log.info("[bold]binarize[/bold]")
            from cli.main import _print_data_table  # the same table as `mt binarize`

            _print_data_table(binarize(exp, cfg))
        elif step == "train":
            log.info("[bold]train[/bold]")
            train(exp, cfg, device=device)
        elif step == "evaluate":
            last = exp.checkpoint_path("last")
            for split in ("valid", "test"):
                if not has_split(cfg.data, split):
                    continue
                score_path = exp.score_path(split)
                if score_path.exists() and last.exists() and score_path.stat().st_mtime > last.stat().st_mtime:
                    scores = exp.read_json(score_path)
                    log.info(f"evaluate {split}: done already ({score_path})")
                else:
                    log.info(f"[bold]evaluate {split}[/bold]")
                    scores = evaluate_split(exp, cfg, split, None, device)
                print_result(f"{split}: BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}  ({scores['bleu_signature']})")
    examples = run.get("translate_examples") or []
    if examples:
        translator = Translator(exp, cfg, None, device)
        for source, output in zip(examples, translator.translate([str(e) for e in examples])):
            print_result(f"{source}  ->  {output}")
    return exp
