r"""Length curriculum for swap tracking (AM §3.2, Fig. 6, p.20).

The paper compares two ways of training on length-256 swap sequences:

* **curriculum**: train at length 32; once the accuracy *at the current
  training length* reaches 0.99, double the length (32 → 64 → 128 → 256);
* **direct**: train at length 256 from the first step.

Fig. 6 plots the training accuracy at the current length against the step,
with and without RoPE (NoPE: no position encoding at all).  The notes give the
stage lengths (32 to 256, doubling) and the switch criterion (accuracy 0.99);
they do not say over how many steps the accuracy is measured, how many steps
are trained in total, or which κ1.  Our choices (docs/tasks.md): the accuracy
is the mean training accuracy over a window of ``window = 25`` consecutive
steps, all at the current length (the same interval the training curve is
logged at), checked at the end of every full window since the stage began; a
stage never ends on a partial window; the last stage runs until the step
budget is spent.  ``switch_at`` gives a fixed-step schedule instead (the
stage boundaries as absolute steps), for ablations and tests.

The schedule is a small state machine, saved in the checkpoint so a resumed
run switches at the same steps.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from assocmem import validate as V

DEFAULT_LENGTHS = (32, 64, 128, 256)      # AM Fig. 6: from 32, doubling, to 256
DEFAULT_THRESHOLD = 0.99                 # AM Fig. 6: switch once the current length reaches 0.99
DEFAULT_WINDOW = 25                      # ours: the accuracy is averaged over 25 steps


@dataclass
class CurriculumSchedule:
    """Stage lengths and the rule that moves from one stage to the next.

    ``lengths``: strictly increasing sequence lengths, one per stage.
    ``threshold``/``window``: leave a stage when the mean training accuracy of
    the last ``window`` steps of that stage is ``>= threshold`` (checked after
    ``window``, ``2 window``, ... steps of the stage).
    ``switch_at``: instead, leave stage ``s`` at the absolute step
    ``switch_at[s]`` (``len(lengths) - 1`` increasing steps); the accuracy is
    then ignored.
    """
    lengths: tuple = DEFAULT_LENGTHS
    threshold: float = DEFAULT_THRESHOLD
    window: int = DEFAULT_WINDOW
    switch_at: Optional[tuple] = None
    # state
    stage: int = 0
    stage_start: int = 0
    switches: list = field(default_factory=list)   # [{"step": s, "length": L}]: steps s+1, ... train at L

    def __post_init__(self):
        lengths = tuple(self.lengths)
        if not lengths:
            raise ValueError("curriculum lengths must name at least one stage")
        lengths = tuple(V.count(f"curriculum lengths[{i}]", L, 1) for i, L in enumerate(lengths))
        if any(b <= a for a, b in zip(lengths, lengths[1:])):
            raise ValueError(f"curriculum lengths must be strictly increasing (got {list(lengths)})")
        self.lengths = lengths
        self.threshold = float(V.in_closed("curriculum threshold", self.threshold, 0.0, 1.0))
        self.window = V.count("curriculum window", self.window, 1)
        if self.switch_at is not None:
            sw = tuple(V.count(f"curriculum switch_at[{i}]", s, 1) for i, s in enumerate(self.switch_at))
            if len(sw) != len(lengths) - 1:
                raise ValueError(f"curriculum switch_at needs {len(lengths) - 1} steps, one per stage change "
                                 f"(got {len(sw)})")
            if any(b <= a for a, b in zip(sw, sw[1:])):
                raise ValueError(f"curriculum switch_at must be strictly increasing (got {list(sw)})")
            self.switch_at = sw

    @classmethod
    def direct(cls, length: int = DEFAULT_LENGTHS[-1]) -> "CurriculumSchedule":
        """The comparison arm: one stage at the final length from the first step."""
        return cls(lengths=(length,))

    @property
    def length(self) -> int:
        """The sequence length to train the next step at."""
        return self.lengths[self.stage]

    @property
    def final(self) -> bool:
        return self.stage == len(self.lengths) - 1

    def update(self, step: int, window_mean: Optional[float] = None) -> bool:
        """Called after step ``step`` (the number of steps done); True when the next step starts a new stage.

        Threshold rule: pass the mean training accuracy of the window that
        ends at ``step`` whenever :meth:`window_due` is true (elsewhere
        ``window_mean`` is ignored).  Fixed-step rule: call it after every step.
        """
        if self.final:
            return False
        if self.switch_at is not None:
            if step >= self.switch_at[self.stage]:
                self._advance(step)
                return True
            return False
        if self.window_due(step) and window_mean is not None and float(window_mean) >= self.threshold:
            self._advance(step)
            return True
        return False

    def window_due(self, step: int) -> bool:
        """Whether ``step`` ends a full window of the current stage (a decision point of the threshold rule)."""
        return (not self.final and self.switch_at is None and step > self.stage_start
                and (step - self.stage_start) % self.window == 0)

    def _advance(self, step: int) -> None:
        self.stage += 1
        self.stage_start = step
        self.switches.append({"step": step, "length": self.length})

    def config(self) -> dict:
        return {"lengths": list(self.lengths), "threshold": self.threshold, "window": self.window,
                "switch_at": None if self.switch_at is None else list(self.switch_at)}

    def state_dict(self) -> dict:
        return {**self.config(), "stage": self.stage, "stage_start": self.stage_start,
                "switches": [dict(s) for s in self.switches]}

    @classmethod
    def from_state(cls, st: dict) -> "CurriculumSchedule":
        sch = cls(lengths=tuple(st["lengths"]), threshold=st["threshold"], window=st["window"],
                  switch_at=None if st["switch_at"] is None else tuple(st["switch_at"]))
        sch.stage, sch.stage_start = int(st["stage"]), int(st["stage_start"])
        sch.switches = [dict(s) for s in st["switches"]]
        return sch


def parse_lengths(text: str) -> tuple:
    """``"32,64,128,256"`` -> ``(32, 64, 128, 256)`` (a ValueError naming the option otherwise)."""
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"curriculum lengths/steps must be comma-separated integers (got {text!r})") from None


def schedule_for(model: str, *, lengths: Optional[Sequence[int]] = None, threshold: Optional[float] = None,
                 window: Optional[int] = None, switch_at: Optional[Sequence[int]] = None) -> CurriculumSchedule:
    """The schedule of a ``curriculum-*`` or ``direct-*`` swap model (defaults: the paper's)."""
    lengths = DEFAULT_LENGTHS if lengths is None else tuple(lengths)
    if model.startswith("direct-"):
        if switch_at:
            raise ValueError("curriculum switch_at: the direct arm has a single stage")
        return CurriculumSchedule.direct(lengths[-1] if lengths else 0)
    return CurriculumSchedule(lengths=lengths, threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
                              window=DEFAULT_WINDOW if window is None else window,
                              switch_at=None if not switch_at else tuple(switch_at))
