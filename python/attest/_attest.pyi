"""Type stubs for the native module (the Rust engine)."""

from typing import Any, Optional

class AttestError(Exception):
    """Attest could not decide or record a call."""

    receipt: Optional[Receipt]

class ConfigError(AttestError):
    """The configuration does not load (the message names file, line and key)."""

class Refused(AttestError):
    """Policy refused the call; the tool did not run."""

class Rejected(AttestError):
    """A person rejected the call; the tool did not run."""

    approver: Optional[str]  # None for Expired

class Expired(Rejected):
    """Nobody approved the call in time; the tool did not run."""

    request_id: str

class Held(AttestError):
    """The call waits for a person; ``token`` resumes it once approved."""

    token: str
    request_id: str

class Replayed(AttestError):
    """A call with the same ``idempotency_key`` and params already ran; the tool did
    not run again. ``receipt`` is the first call's outcome row."""

class Receipt:
    """What one call left in the ledger."""

    @property
    def action_id(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def entry_hash(self) -> str: ...
    @property
    def ts(self) -> str: ...
    @property
    def decision(self) -> str: ...
    @property
    def reasons(self) -> list[str]: ...
    @property
    def approver(self) -> Optional[str]: ...
    @property
    def level(self) -> Optional[str]: ...
    @property
    def warning(self) -> Optional[str]: ...
    def to_dict(self) -> dict[str, Any]: ...

class Running:
    """A call cleared to run."""

    @property
    def params(self) -> str: ...
    @property
    def edited(self) -> bool: ...
    def finish(
        self,
        result: str,
        verified: Optional[bool] = None,
        record: Optional[str] = None,
        check_failed: bool = False,
        check_cancelled: bool = False,
    ) -> Receipt: ...
    def fail(self, error: str) -> Receipt: ...

class Engine:
    """One ledger, one policy, one approval store."""

    def __init__(
        self,
        config: Optional[str] = None,
        ledger: Optional[str] = None,
        tenant: Optional[str] = None,
        policy: Optional[str] = None,
        agent: Optional[str] = None,
        actor: Optional[str] = None,
        key: Optional[str] = None,
        durability: Optional[str] = None,
        wait: Optional[float] = None,
        shadow: bool = False,
        agent_token: Optional[str] = None,
    ) -> None: ...
    def start(
        self,
        name: str,
        params: str,
        system: Optional[str] = None,
        verb: Optional[str] = None,
        target: Optional[str] = None,
        framework: Optional[str] = None,
        run_id: Optional[str] = None,
        token: Optional[str] = None,
        verify: bool = False,
        read_back: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> Running: ...
    def resume(self, token: str, verify: bool = False, read_back: Optional[str] = None) -> Running: ...
    def request(self, id: str) -> str: ...
    def inbox_url(self) -> str: ...
    def request_link(self, id: str) -> str: ...
    def record(
        self,
        name: str,
        params: str,
        system: Optional[str] = None,
        verb: Optional[str] = None,
        target: Optional[str] = None,
        result: Optional[str] = None,
        framework: Optional[str] = None,
        run_id: Optional[str] = None,
    ) -> Receipt: ...
    def checkpoint(self) -> str: ...
