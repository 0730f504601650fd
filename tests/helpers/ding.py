"""The Ding dictionary (Debian's trans-de-en): a sample in its shapes, and a big synthetic file."""

from __future__ import annotations

from pathlib import Path


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


# Lines in the shapes of Debian's trans-de-en (GPL-2+; a few lines quoted, some shortened), plus
# crafted ones for duplicates, unaligned variants and a second translation of one sentence.
DING_SAMPLE = """\
# Version :: devel 2023-01-30
# License :: GPL Version 2 or later; GNU General Public License
Aalleiter {f}; Aaltreppe {f}; Aalpass {m} (Wasserbau) | Aalleitern {pl}; Aaltreppen {pl}; Aalpässe {pl} :: eel ladder (water engineering) | eel ladders
Aalmolche {pl}; Fischmolche {pl} (Amphiuma) (zoologische Gattung) [zool.] <Aalmolch> :: amphiuma salamanders; amphiumas; congo eels [coll.]; congo snakes [coll.] (zoological genus)
Gütertrennung {f} [jur.] | Die Ehegatten leben in Gütertrennung.; Es besteht Gütertrennung. :: (regime of) separation of property (between spouses) | The spouses are living under the regime of separation of property.
Lebenserwartung {f} [biol.] | Männer haben eine geringere Lebenserwartung als Frauen. :: lifespan; lifetime | Man have a shorter lifespan than women.
nichts dafürkönnen {vi} (es nicht bewusst steuern können) [psych.] | Er kann nichts dafür. Er ist von Natur aus so. :: cannot help it | He can’t help it. It’s in his nature.
rundweg; entschieden {adv} | etw. rundweg leugnen | Sie leugnete rundweg. :: flatly | to deny sth. flatly | She flatly denied.
Ach ja?; Ah ja? {interj} (Ausdruck von Zweifel) | „Das müsste leicht zu eruieren sein.“ :: Oh yes? (used to express doubt) | 'It should be easy to find out.'
Medikament {n} | Nehmen Sie (irgendwelche) Medikamente? :: medicine | Are you taking any medication?
Schnee {m} [meteo.] | Es hat geschneit, aber der Schnee ist nicht liegengeblieben. :: snow | We had some snow, but it didn’t settle [Br.].
Kontonummer {f} /Kto.-Nr./ [fin.] | Kontonummern {pl} :: account number /acct. no./ | account numbers
Aalfang {m} :: eel fishing
Aalfang {m} :: eel fishing
Aalsuppe {f} [cook.] | Aalsuppen {pl} | Das ist eine Suppe. :: eel soup | eel soups
Lebenserwartung {f} | Männer haben eine geringere Lebenserwartung als Frauen. :: life expectancy | Men have a shorter life expectancy than women.
Lebensdauer {f} :: lifespan
leugnen {vt} | Sie leugnete rundweg.; Sie stritt es ab. :: to deny | She denied it; She flatly denied it.
"""


def write_big_ding(path: Path, sentences: int = 1200, phrases: int = 30) -> Path:
    """A synthetic Ding file with more sentence pairs than the 2 * HELD_OUT that valid and test hold
    out: line i is "Das ist Satz Nummer i hier. :: This is sentence number i here.", then phrase lines
    "Wort i {n} :: word i" (unit/test_ding.py and unit/test_corpus.py)."""
    lines = ["# Version :: synthetic"]
    lines += [f"Das ist Satz Nummer {i} hier. :: This is sentence number {i} here." for i in range(sentences)]
    lines += [f"Wort {i} {{n}} :: word {i}" for i in range(phrases)]
    return write(path, "\n".join(lines) + "\n")
