"""What the one-door test generates: the policies (a base policy and the amendments an operator
makes to it), the requests for writes, and the steps of a sequence, each a small value whose
repr reads as what happens.

Hypothesis favours the first choice of every `sampled_from` / `one_of` (it is also where values
shrink to), so the first of each list is the most productive one: the base policy's main ask
rule, a request in #C1, a click by an approver.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from hypothesis import strategies as st

from tests.one_door_policy import Cond, Policy, Rule, Step
from tests.one_door_reference import Call, Reference
from tests.one_door_world import APPROVERS_CHANNEL, EXEC, GROUP, PUBLIC

MAIN = "tasks"  # the main ask rule
SCOPES = ("thread", "channel", "me")
BASE = Policy(
    "ask",
    (
        Rule("no-urgent", "deny", when=Cond("priority", "urgent")),
        Rule(MAIN, "ask", approvers=("UBOB", GROUP), grants=SCOPES),
    ),
)
FIRST: dict[str, Rule] = {  # a rule put in front of the others
    "deny urgent first": BASE.rules[0],
    "deny everything in C1": Rule("freeze", "deny", channels=(PUBLIC,)),
    "a stricter rule first": Rule(
        "strict", "ask", approvers=("UCAROL",), four_eyes=True, grants=SCOPES
    ),
    "a stricter rule for high priority": Rule(
        "strict-high",
        "ask",
        when=Cond("priority", "high"),
        approvers=("UCAROL",),
        four_eyes=True,
        grants=SCOPES,
    ),
    "allow low priority first": Rule(
        "low-ok", "allow", tools=("create_task",), when=Cond("priority", "low")
    ),
    "a broken allow rule first": Rule(
        "dana", "allow", tools=("create_task",), when=Cond("assignee_prefix", "UD")
    ),
    "a broken deny rule first": Rule(
        "dana-deny", "deny", tools=("create_task",), when=Cond("assignee_prefix", "UD")
    ),
    "leads may do anything": Rule("leads-ok", "allow", groups=(GROUP,)),
    "#exec asks Carol": Rule("exec", "ask", channels=(EXEC,), approvers=("UCAROL",), grants=SCOPES),
    "no updates": Rule("no-updates", "deny", tools=("update_task",)),
    "allow low priority, even after a tool result": Rule(
        "low-any",
        "allow",
        tools=("create_task",),
        when=Cond("priority", "low"),
        after_untrusted="allow",
    ),
    "every tool asks Carol": Rule("all-carol", "ask", tools=("*",), approvers=("UCAROL",)),
    "ask on reads of tasks": Rule("reads-asked", "ask", tools=("list_tasks",), approvers=("UBOB",)),
    "fetches run even after untrusted input": Rule(
        "fetch-ok", "allow", tools=("web__fetch",), after_untrusted="allow"
    ),
    "no fetches of high priority": Rule(
        "no-fetch", "deny", tools=("web__fetch",), when=Cond("priority", "high")
    ),
    "allow high priority, but deny it after untrusted input": Rule(
        "high-careful",
        "allow",
        tools=("create_task",),
        when=Cond("priority", "high"),
        after_untrusted="deny",
    ),
}
MAIN_CHANGES: dict[str, dict[str, Any]] = {  # changes to the main ask rule
    "drop the first approver": {},
    "drop the user group": {},
    "only Carol approves": {"approvers": ("UCAROL",)},
    "the guest approves too": {},
    "Alice approves too": {},
    "nobody named: the requester decides": {"approvers": ()},
    "four-eyes on": {"four_eyes": True},
    "four-eyes off": {"four_eyes": False},
    "quorum of two": {"approvals_required": 2},
    "quorum of one": {"approvals_required": 1},
    "no grants": {"grants": ()},
    "thread grants only": {"grants": ("thread",)},
    "every grant scope": {"grants": SCOPES},
    "escalate to allow after 1h": {"escalate": (Step(1, outcome="allow"),)},
    "escalate to Dana after 1h": {"escalate": (Step(1, to=("UDANA",)),)},
    "escalate to Dana, then allow": {
        "escalate": (Step(1, to=("UDANA",)), Step(2, outcome="allow"))
    },
    "escalate to deny after 1h": {"escalate": (Step(1, outcome="deny"),)},
    "no escalation": {"escalate": ()},
    "route by DM": {"route": "dm"},
    f"route to {APPROVERS_CHANNEL}": {"route": f"channel:{APPROVERS_CHANNEL}"},
    "grants cover after untrusted input too": {"after_untrusted": "allow"},
    "no grant covers after any untrusted input": {"after_untrusted": "ask"},
    "after untrusted input: the default": {"after_untrusted": None},
}
OTHER_CHANGES = ("allow urgent", "default deny", "default allow", "a shadow deny")
# The budget's owners (issue 29): who decides a raise, changed by a reload.
OWNER_CHANGES: dict[str, tuple[str, ...]] = {
    "the budget is Carol's alone": ("UCAROL",),
    "the budget is Dana's and the leads'": ("UDANA", GROUP),
    "the budget is Bob's and the leads' again": ("UBOB", GROUP),
}
RAISE_RULES: dict[str, Rule] = {  # rules naming raises, put first
    "raises need two owners": Rule("raises-two", "ask", tools=("budgets",), approvals_required=2),
    "raises are allowed (still a card)": Rule("raises-ok", "allow", tools=("budget_raise",)),
    "no raises": Rule("no-raises", "deny", tools=("budget_raise",)),
}
ALL_CHANGES = (*MAIN_CHANGES, *FIRST, *OTHER_CHANGES, *OWNER_CHANGES, *RAISE_RULES)
# Reloads: the changes that move who may decide come first (hypothesis favours the first).
LEADING = (
    "a stricter rule first",
    "the budget is Carol's alone",
    "drop the first approver",
    "nobody named: the requester decides",
    "quorum of two",
    "deny everything in C1",
    "no escalation",
)
AMENDMENTS = (*LEADING, *(c for c in ALL_CHANGES if c not in LEADING))
# The policy a sequence starts with: the base, with changes that open other paths first.
OPENING = (
    "Alice approves too",
    "allow low priority, even after a tool result",
    "escalate to allow after 1h",
    "nobody named: the requester decides",
    "route by DM",
    "a broken allow rule first",
    "#exec asks Carol",
)
INITIAL = (*OPENING, *(c for c in ALL_CHANGES if c not in OPENING))


def amend(policy: Policy, change: str) -> Policy:
    """`policy` with one change, of the kind an operator makes: to the main ask rule `tasks`
    (put back, asking Bob, if it was gone), a rule put first, or the default."""
    rules = list(policy.rules)
    default = policy.default
    owners = OWNER_CHANGES.get(change, policy.owners)
    if change in RAISE_RULES:
        first = RAISE_RULES[change]
        rules = [first, *(r for r in rules if r.name not in {x.name for x in RAISE_RULES.values()})]
        return Policy(default, tuple(rules), owners)
    main = next((r for r in rules if r.name == MAIN), None)
    if main is None:
        main = Rule(MAIN, "ask", approvers=("UBOB",))
        rules.append(main)
    at = rules.index(main)
    if change in MAIN_CHANGES:
        fields = dict(MAIN_CHANGES[change])
        if change == "drop the first approver":
            fields["approvers"] = main.approvers[1:]
        elif change == "drop the user group":
            fields["approvers"] = tuple(a for a in main.approvers if a != GROUP)
        elif change in ("the guest approves too", "Alice approves too"):
            added = "UGUEST" if change.startswith("the guest") else "UALICE"
            fields["approvers"] = tuple(dict.fromkeys((*main.approvers, added)))
        rules[at] = replace(main, **fields)
    elif change in FIRST:
        rules = [FIRST[change], *(r for r in rules if r.name != FIRST[change].name)]
    elif change == "allow urgent":
        rules = [r for r in rules if r.name != "no-urgent"]
    elif change in ("default deny", "default allow"):
        default = "deny" if change == "default deny" else "allow"
    elif change == "a shadow deny":
        shadow = Rule("shadow-deny", "deny", shadow=True)
        rules = [*(r for r in rules if r.name != shadow.name), shadow]
    return Policy(default, tuple(rules), owners)


def amended(changes: list[str]) -> Policy:
    policy = BASE
    for change in changes:
        policy = amend(policy, change)
    return policy


ROLES = ("an approver", "another approver", "the requester", "a lead", "a stranger", "the guest")


def resolve(role: str, call: Call, ref: Reference) -> str:
    """The person a role names for `call`, as its card showed its approvers."""
    named = sorted(ref.world.expand(call.card_approvers)) or [call.requester]
    if role == "an approver":
        return named[0]
    if role == "another approver":
        return named[1 % len(named)]
    if role == "the requester":
        return call.requester
    if role == "a lead":
        return (sorted(ref.world.groups[GROUP]) or ["UCAROL"])[0]
    if role == "a stranger":
        return "UMALLORY"
    return "UGUEST"


# -- requests and steps -------------------------------------------------------------------------
@dataclass(frozen=True)
class Ask:
    """A request for one write: who, where (C1; C1 after reading #exec; #exec; their DM), which
    thread (None: a new one; n: the n-th earlier thread there), the tool and its fields."""

    requester: str = "UALICE"
    # C1 | C1+read (after reading CAPPROVE, public: a tool result) | C1+exec (after reading #exec) |
    # C1+member (after another full member's message in the thread) | GEXEC | DM
    place: str = PUBLIC
    thread: int | None = None
    tool: str = "create_task"
    priority: str | None = None
    assignee: str | None = None
    target: int = 0  # update_task: which earlier task (n-th, wrapping)


@dataclass(frozen=True)
class Approve:
    """Someone (by role, for the card's approvers) clicks an approve button of a card;
    `back`: 0 the latest card, 1 the one before, ..."""

    who: str = ROLES[0]
    button: str = "channel"  # channel | approve | thread | me
    back: int = 0


@dataclass(frozen=True)
class Click:
    """Anyone clicks an approve button, on the card's current revision or the one before."""

    user: str
    button: str
    stale: bool
    back: int = 0


@dataclass(frozen=True)
class Edit:
    who: str
    priority: str | None
    assignee: str | None  # "": cleared
    back: int = 0


@dataclass(frozen=True)
class ApproveInOutage:
    """The board is down while someone approves: the write fails and waits for a Retry."""

    who: str
    back: int = 0


@dataclass(frozen=True)
class Retry:
    user: str
    back: int = 0


@dataclass(frozen=True)
class Reload:
    change: str


@dataclass(frozen=True)
class Toggle:
    """`user` joins or leaves `where` (the user group, #exec, or #C1 for the guest)."""

    user: str
    where: str


@dataclass(frozen=True)
class Tick:
    """An hour passes for the escalation ladders; the sweeper runs."""


@dataclass(frozen=True)
class Restart:
    """The bot stops and starts again on the same database."""


@dataclass(frozen=True)
class Propose:
    ask: Ask


@dataclass(frozen=True)
class AskRaise:
    """`requester`'s turn pauses at the budget; someone (by role: the requester, an owner,
    a stranger, the guest) clicks Ask to raise on its card and sends the form as it is."""

    requester: str
    who: str


@dataclass(frozen=True)
class ApproveRaise:
    """Someone (by role, for the raise card's deciders) approves a waiting raise."""

    who: str
    back: int = 0


@dataclass(frozen=True)
class Continue:
    """In the thread of a waiting proposal (`back`: which), `pauser` (another person than its
    requester) asks a question (`writes`: for a write) and their turn pauses at a budget of
    theirs; someone (by role: the pauser, the waiting proposal's requester, its approver)
    clicks "Continue on a cheaper model" on the pause's card. The turn whose proposal waits
    asks for one more write once it is settled (tests/one_door_continues.py)."""

    pauser: str
    who: str
    writes: bool = False
    back: int = 0


PEOPLE_CLICKING = ("UBOB", "UCAROL", "UALICE", "UDANA", "UGUEST", "UMALLORY")
MOVERS = ("UCAROL", "UBOB", "UGUEST", "UDANA")
BUTTONS = ("channel", "approve", "thread", "me")  # a grant first: it approves, and leaves one
backs = st.sampled_from([0, 0, 0, 1, 2])

asks = st.builds(
    Ask,
    requester=st.sampled_from(["UALICE", "UDANA"]),
    place=st.sampled_from([PUBLIC, "C1+read", PUBLIC, "C1+exec", "C1+member", EXEC, "DM"]),
    thread=st.sampled_from([None, None, 0, 1]),
    tool=st.sampled_from(["create_task", "create_task", "create_task", "update_task"]),
    priority=st.sampled_from([None, None, None, None, "low", "high", "high", "urgent"]),
    assignee=st.sampled_from([None, None, None, "UDANA", "UBOB"]),
    target=st.integers(0, 3),
)
approves = st.builds(
    Approve, who=st.sampled_from(ROLES), button=st.sampled_from(BUTTONS), back=backs
)


reloads = st.builds(Reload, st.sampled_from(AMENDMENTS))
ASKERS = ("the requester", "an approver", "a stranger", "the guest")
raise_asks = st.builds(
    AskRaise, st.sampled_from(["UALICE", "UDANA", "UCAROL"]), st.sampled_from(ASKERS)
)
raise_approvals = st.builds(ApproveRaise, st.sampled_from(ROLES), backs)
CONTINUERS = ("the pauser", "the pauser", "the waiting requester", "an approver")
continues = st.builds(
    Continue,
    st.sampled_from(["UDANA", "UCAROL", "UALICE"]),
    st.sampled_from(CONTINUERS),
    st.booleans(),
    backs,
)
# Reloads that move who decides a raise: its owners, a rule naming it.
raise_owners = st.builds(Reload, st.sampled_from([*OWNER_CHANGES, *RAISE_RULES]))
edits = st.builds(
    Edit,
    who=st.sampled_from(ROLES),
    priority=st.sampled_from(["urgent", "high", "low", None]),
    assignee=st.sampled_from([None, "", "UDANA"]),
    back=backs,
)


def copies(strategy: st.SearchStrategy[Any], n: int) -> list[st.SearchStrategy[Any]]:
    """`n` strategies drawing as `strategy` does, told apart by `st.one_of`."""
    return [strategy, *(strategy.map(lambda value: value) for _ in range(n - 1))]


def steps(restarts: bool, raises: bool = False) -> st.SearchStrategy[Any]:
    """One step. Approving comes first and most often (most writes wait for a click), then
    what changes the answer under a card: reloads, edits, new requests. `raises`: budget
    raises asked and approved among them, often (issue 29), and turns paused at a budget
    continued on its cheaper model. Each function's fixed seed takes every kind of step
    (asserted in tests/test_one_door_model.py)."""
    # `one_of` counts a strategy given twice once (by identity, and `st.builds` with the same
    # arguments is one cached strategy): a step taken often is given as copies of it.
    kinds: list[st.SearchStrategy[Any]] = [
        *copies(approves, 3),
        *copies(reloads, 3),
        *copies(edits, 2),
        *copies(st.builds(Propose, asks), 2),
        st.builds(Toggle, st.sampled_from(MOVERS), st.sampled_from([GROUP, EXEC, PUBLIC])),
        st.just(Tick()),
        st.builds(ApproveInOutage, st.sampled_from(ROLES), backs),
        st.builds(
            Click,
            st.sampled_from(PEOPLE_CLICKING),
            st.sampled_from(BUTTONS),
            st.booleans(),
            backs,
        ),
        st.builds(Retry, st.sampled_from(PEOPLE_CLICKING), backs),
    ]
    if raises:
        # Continuing after a pause takes three more steps to matter (the waiting proposal
        # settled, its turn's next write decided): given often.
        kinds[0:0] = [raise_approvals, *copies(continues, 3), raise_asks, raise_owners]
    if restarts:
        kinds.append(st.just(Restart()))
    return st.one_of(kinds)
