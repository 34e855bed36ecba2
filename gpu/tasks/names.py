"""Task and model names (no torch import: the CLI registers its parsers from these)."""
TASKS = ("collision_recall", "random_keys", "swap_tracking")
MIXERS = ("bl", "reset", "delta", "linear", "gla", "diag")
KAPPAS = ("linear", "round2", "relu", "exp", "softmax")
SWAP_MODELS = tuple(f"deltaformer-{k}" for k in KAPPAS) + tuple(f"transformer-{L}" for L in (1, 2, 4, 8))
STRESS_NS = (128, 256, 512)
STRESS_MODELS = tuple(f"stress-{k}-{n}" for k in ("linear", "round2") for n in STRESS_NS)
MODELS_BY_TASK = {"collision_recall": MIXERS, "random_keys": MIXERS, "swap_tracking": SWAP_MODELS + STRESS_MODELS}
