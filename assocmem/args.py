"""The command-line plumbing every entry point shares (base layer: it imports nothing above).

Bad input never gives a traceback.  Three mechanisms, shared by ``assocmem``
and by the learned tasks' and the benchmark's own entry points:

* :class:`Parser` (the parser class of every command and sub-command) prints
  argparse's own errors as one line and exits 2, and reads ``-inf``, ``-1e5``
  as values, not options;
* the argument types (:class:`Real`, :class:`Int`, :class:`Items`) reject NaN,
  ±inf, values out of range, magnitudes a float64 model cannot carry, empty and
  unknown list items, naming the flag (argparse's ``argument --rho: ...``);
* :func:`dispatch` turns a ``ValueError`` raised anywhere below into one line
  on stderr and exit status 2, replacing the parameter's name at the start of
  the message by the flag the user typed (``n_a`` -> ``--n-a``; a parser's
  :meth:`Parser.alias` maps internal names such as ``lam`` -> ``--reset-lambda``).
"""
from __future__ import annotations

import argparse
import math
import re
import sys

# float64 models square their scale parameters (a covariance times a covariance,
# a gain times a variance): magnitudes beyond these over- or underflow
SCALE_MIN, SCALE_MAX = 1e-100, 1e100


class Parser(argparse.ArgumentParser):
    """``ArgumentParser`` whose errors are one line (``PROG: error: MESSAGE``, exit 2)."""

    # a negative number, written any way float() reads it: -1, -1.5, -.5, -1e-3, -inf, -nan
    NEGATIVE_NUMBER = re.compile(r"^-(\d[\d_]*\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$", re.I)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = self.NEGATIVE_NUMBER
        self.param_flags: dict[str, str] = {}

    def alias(self, **names: str) -> None:
        """Internal parameter names that stand for a flag (``lam="--reset-lambda"``)."""
        self.param_flags.update(names)

    def _get_values(self, action, arg_strings):
        # argparse drops a "--" it takes for the end of options, even in "--seed=--",
        # and hands the action an empty list instead of a string
        if action.nargs is None and action.option_strings and arg_strings == ["--"]:
            raise argparse.ArgumentError(action, "expected a value (got '--')")
        return super()._get_values(action, arg_strings)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {_one_line(message)}\n")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


# -- argument types ---------------------------------------------------------
def _fail(msg: str):
    raise argparse.ArgumentTypeError(msg)


def _num(text: str) -> float:
    t = text.strip()
    if not t:
        _fail("empty value (give a number)")
    try:
        return float(t)
    except ValueError:
        _fail(f"not a number: {text!r}")


class Real:
    """A finite float in ``[lo, hi]`` (``lo_open``/``hi_open``: strict).

    ``scale=True``: a non-zero magnitude must also lie in
    ``[SCALE_MIN, SCALE_MAX]`` (1e-100 .. 1e100), where the float64 models
    neither overflow nor underflow.
    """

    def __init__(self, lo=None, hi=None, *, lo_open=False, hi_open=False, scale=False):
        self.lo, self.hi, self.lo_open, self.hi_open, self.scale = lo, hi, lo_open, hi_open, scale
        self.__name__ = "number"

    def describe(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f"in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}"
        if self.lo is not None:
            return f"{'>' if self.lo_open else '>='} {self.lo:g}"
        if self.hi is not None:
            return f"{'<' if self.hi_open else '<='} {self.hi:g}"
        return "finite"

    def __call__(self, text: str) -> float:
        x = _num(text)
        if math.isnan(x):
            _fail(f"must be a number {self.describe()} (got NaN)")
        if math.isinf(x):
            _fail(f"must be finite (got {text.strip()!r}, which is {'+' if x > 0 else '-'}inf in float64)")
        lo_bad = self.lo is not None and (x <= self.lo if self.lo_open else x < self.lo)
        hi_bad = self.hi is not None and (x >= self.hi if self.hi_open else x > self.hi)
        if lo_bad or hi_bad:
            _fail(f"must be {self.describe()} (got {x:g})")
        if self.scale and x != 0 and not SCALE_MIN <= abs(x) <= SCALE_MAX:
            _fail(f"{x:g} is outside the float64-safe range {SCALE_MIN:g} .. {SCALE_MAX:g} of a scale "
                  f"parameter (the model squares it)")
        return x


class Int:
    """An integer in ``[lo, hi]``; ``1e6``-style spellings of integers are accepted."""

    def __init__(self, lo=None, hi=None):
        self.lo, self.hi = lo, hi
        self.__name__ = "integer"

    def __call__(self, text: str) -> int:
        t = text.strip()
        if not t:
            _fail("empty value (give an integer)")
        try:
            n = int(t)
        except ValueError:
            try:
                x = float(t)
            except ValueError:
                _fail(f"not an integer: {text!r}")
            if not math.isfinite(x) or not x.is_integer():
                _fail(f"must be an integer (got {text.strip()!r})")
            n = int(x)
        if self.lo is not None and n < self.lo:
            _fail(f"must be >= {self.lo} (got {n})")
        if self.hi is not None and n > self.hi:
            _fail(f"must be <= {self.hi} (got {n})")
        return n


SEED = Int(0, 2 ** 63 - 1)


class Items:
    """A comma-separated list: no empty item, no item twice, each in ``choices``
    (when given) and parsed by ``item`` (when given).  Returns a tuple."""

    def __init__(self, choices=None, item=None, *, what="item"):
        self.choices, self.item, self.what = (tuple(choices) if choices is not None else None), item, what
        self.__name__ = "list"

    def __call__(self, text: str) -> tuple:
        parts = [p.strip() for p in text.split(",")]
        if not any(parts):
            hint = f" (choose from {', '.join(self.choices)})" if self.choices else ""
            _fail(f"empty list: give at least one {self.what}{hint}")
        if "" in parts:
            _fail(f"empty {self.what} in {text!r} (a stray comma?)")
        out = []
        for p in parts:
            if self.choices is not None and p not in self.choices:
                _fail(f"unknown {self.what} {p!r} (choose from {', '.join(self.choices)})")
            v = p
            if self.item is not None:
                try:
                    v = self.item(p)
                except argparse.ArgumentTypeError as exc:
                    _fail(f"{self.what} {p!r}: {exc}")
            if v in out:
                _fail(f"{self.what} {p!r} is listed twice")
            out.append(v)
        return tuple(out)



# -- which flag a message is about, and the dispatch ------------------------
def selected_parser(parser: argparse.ArgumentParser, args) -> argparse.ArgumentParser:
    """The (sub-)parser that parsed the chosen command: its flags name the message."""
    p = parser
    while True:
        sub = next((a for a in p._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(args, sub.dest, None) if sub is not None else None
        if name is None or name not in sub.choices:
            return p
        p = sub.choices[name]


def _norm(name: str) -> str:
    return re.sub(r"\[\d+\]$", "", name.strip().lower()).replace("-", "_").replace(" ", "_")


def flag_table(p: argparse.ArgumentParser) -> dict[str, str]:
    """Parameter name -> the flag that sets it (``n_a`` -> ``--n-a``; positionals keep their name)."""
    table = {}
    for a in p._actions:
        if a.dest in (argparse.SUPPRESS, "help"):
            continue
        longs = [o for o in a.option_strings if o.startswith("--")]
        table[_norm(a.dest)] = (longs or a.option_strings or [a.dest])[0]
    for name, flag in getattr(p, "param_flags", {}).items():
        table[_norm(name)] = flag
    return table


_LEAD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?(?:[ _-][A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?){0,2})")


def name_flags(message: str, p: argparse.ArgumentParser, param: str | None = None) -> str:
    """Replace the parameter name that starts ``message`` by its flag."""
    message = _one_line(message)
    if message.startswith("-"):
        return message
    table = flag_table(p)
    if param is not None and message.startswith(param) and _norm(param) in table:
        return table[_norm(param)] + message[len(param):]
    m = _LEAD.match(message)
    if not m:
        return message
    words = re.split(r"([ _-])", m.group(1))      # keep the separators
    for n in range(len(words), 0, -2):             # longest name first: "curriculum threshold", "curriculum"
        cand = "".join(words[:n])
        if _norm(cand) in table:
            idx = re.search(r"\[\d+\]$", cand)        # "lengths[0]": keep which item
            return table[_norm(cand)] + (idx.group(0) if idx else "") + message[len(cand):]
    return message


def dispatch(parser: argparse.ArgumentParser, argv: list[str] | None = None, label: str | None = None) -> int:
    """Parse, run the chosen sub-command, and turn a ``ValueError`` into one
    line on stderr with exit status 2 (shared by every entry point).  Returns
    the exit status, argparse's too (2 for its errors, 0 for ``--help``), so an
    in-process caller sees the same as a shell.  The line starts with the
    chosen sub-command's ``prog`` (``label`` is accepted for compatibility)."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:        # argparse's one-line error (exit 2), --help or --version (0)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    p = selected_parser(parser, args)
    if not getattr(args, "func", None):
        parser.print_help()
        print(f"{parser.prog}: error: choose a command (listed above)", file=sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:
        print(f"{p.prog}: error: {name_flags(str(exc), p, getattr(exc, 'param', None))}", file=sys.stderr)
        return 2
    except MemoryError:
        # the size estimates (assocmem.budget) should refuse first; this is the backstop
        print(f"{p.prog}: error: out of memory: the arguments ask for more than this machine has "
              f"(set ASSOCMEM_MAX_MEMORY lower to be refused up front)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
