"""One line of `countersign doctor`'s report, shared by the core checks (`bot/doctor.py`) and
the integrations' (`bot/doctor_integrations.py`) so that neither imports the other for it."""

from __future__ import annotations

from dataclasses import dataclass

TIMEOUT_SECONDS = 15


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"[{'ok' if self.ok else 'FAIL'}] {self.name}: {self.detail}"
