"""`countersign doctor`'s spend check: a money budget counts dollars only for models with a
price, so every model such a budget may see (LLM_MODEL, each money budget's fallback_model)
needs one, shipped or in the MODEL_PRICES file."""

from __future__ import annotations

from bot.config import Settings
from bot.doctor_checks import Check
from bot.policy.model import PolicyError
from bot.policy.source import read_file


def check_prices(settings: Settings) -> Check:
    path = settings.policy_path
    if path is None:
        return Check("prices", True, "no budgets (no policy file)")
    try:
        policy, _ = read_file(path)
    except PolicyError as exc:  # the settings check reports the file itself
        return Check("prices", False, f"cannot read the budgets of {path}: {exc}")
    money = [b for b in policy.budgets if b.usd is not None]
    if not money:
        return Check("prices", True, "no budget limits dollars")
    try:
        prices = settings.load_prices()
    except ValueError as exc:
        return Check("prices", False, f"MODEL_PRICES: {exc}")
    models = {settings.llm_model} | {b.fallback_model for b in money if b.fallback_model}
    missing = sorted(m for m in models if prices.of(m) is None)
    if missing:
        names = ", ".join(repr(m) for m in missing)
        return Check(
            "prices",
            False,
            f"no price for {names}, which a budget in dollars may use: its spend would count "
            "as $0. Add it to the MODEL_PRICES file as MODEL: {input: USD, cached_input: USD, "
            "output: USD} (USD per million tokens).",
        )
    return Check(
        "prices",
        True,
        f"every model a budget in dollars may use has a price ({', '.join(sorted(models))})",
    )
