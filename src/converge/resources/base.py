"""The resource plugin interface: what every resource type implements.

A plugin turns properties into a real thing and back. It is stateless: everything it needs
arrives in the ``ResourceContext`` and the ``AppliedState`` of the resource, and everything
it wants remembered goes back in an ``Outcome``. Errors follow a small contract
(``converge.errors``): ``ReplacementRequired`` from ``update`` asks for create-before-delete
replacement, ``RetryLater`` for a temporary failure, ``PermanentFailure`` for a failure that
retrying will not fix. Anything else raised is reported as a plugin bug.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from converge.core.schema import AttributeSchema, PropertySchema, ResourceTypeSchema

if TYPE_CHECKING:
    # Only named in annotations: loading the plugin interface (every plugin module does, and
    # ``converge validate`` loads them all for their schemas) should not load logging.
    import logging


class Clock(Protocol):
    """Monotonic time and sleeping; injected so tests and timeouts agree on one clock."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


@dataclass(frozen=True)
class NestedStackState:
    """A nested stack as its owning resource sees it."""

    stack_id: str
    stack_name: str
    state: str  # Heat's stack_status: CREATE_COMPLETE, UPDATE_FAILED, …
    reason: str
    outputs: Mapping[str, Any] = field(default_factory=dict)  # output name -> value
    project_id: str = ""

    @property
    def is_complete(self) -> bool:
        return self.state.endswith("_COMPLETE")

    @property
    def arn(self) -> str:
        """Heat's identifier of the stack, which ``get_resource`` of a template resource
        gives: ``arn:openstack:heat::PROJECT:stacks/NAME/ID``."""
        return f"arn:openstack:heat::{self.project_id}:stacks/{self.stack_name}/{self.stack_id}"


class NestedStacks(Protocol):
    """What the engine offers a plugin whose real thing is a stack (provider templates)."""

    async def apply(
        self,
        ctx: ResourceContext,
        properties: Mapping[str, Any],
        stack_id: str | None,
        *,
        template: Mapping[str, Any] | None = None,
    ) -> str:
        """Start creating (``stack_id`` None) or updating the nested stack of the resource
        in ``ctx``, to its template in the owner's current files (or to ``template``, one
        the plugin made, such as a group's), with ``properties`` as parameters; return its
        id."""
        ...

    async def wait(self, stack_id: str) -> NestedStackState:
        """Wait until the nested stack's operation has settled."""
        ...

    async def delete(self, ctx: ResourceContext, stack_id: str | None) -> NestedStackState | None:
        """Delete the resource's nested stack and wait; None when there was none.

        With no ``stack_id`` (a create that failed or was interrupted before it was
        recorded) the stack is found by the resource's physical name.
        """
        ...

    async def find(self, ctx: ResourceContext, stack_id: str | None) -> NestedStackState | None:
        """The resource's nested stack as it is now; None when it does not exist."""
        ...


@dataclass(frozen=True)
class ResourceContext:
    """Everything a plugin action may use besides its properties."""

    stack_id: str
    stack_name: str
    resource_name: str
    # Deterministic name for what the plugin creates (stack, resource, short id): an
    # interrupted create can find what it already made instead of making it twice.
    physical_name: str
    clock: Clock
    deadline: float | None  # clock.now() value after which the action has timed out
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger]
    allowed_roots: tuple[Path, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    nested: NestedStacks | None = None  # given by the engine; absent where no engine runs
    # The traversal compares with observed reality (Heat's ``converge: true``): what a
    # plugin converges inside (a nested stack) should do the same.
    converge: bool = False
    # The resource's ``update_policy`` section, evaluated (a group's rolling update).
    update_policy: Any = None
    # On delete: the deletion_policy the resource's template wrote out (``Delete``,
    # ``Snapshot``); None when it left the default. Lets a plugin keep what it adopted
    # unless told explicitly to delete it.
    deletion_policy: str | None = None

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None: no deadline)."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self.clock.now())


@dataclass(frozen=True)
class ValidationContext:
    """What a plugin's own validation may consult (no stack exists yet)."""

    allowed_roots: tuple[Path, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    # Properties the template sets to values known only once other resources exist: they
    # are left out of the properties validated, and are not absent (no default applies).
    unknown: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ObserverContext:
    """What listing or watching a whole type may use (no single resource involved)."""

    clock: Clock
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger]
    allowed_roots: tuple[Path, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AppliedState:
    """What converge last made real for a resource."""

    physical_id: str | None
    properties: Mapping[str, Any]
    data: Mapping[str, Any] = field(default_factory=dict)  # the plugin's own remembered data


@dataclass(frozen=True)
class Outcome:
    """The result of create or update: the physical id and the plugin data to remember."""

    physical_id: str | None
    data: Mapping[str, Any] = field(default_factory=dict)


class ResourcePlugin(ABC):
    """Base class of every resource type."""

    type_name: ClassVar[str]
    description: ClassVar[str] = ""
    properties_schema: ClassVar[Mapping[str, PropertySchema]] = {}
    attributes_schema: ClassVar[Mapping[str, AttributeSchema]] = {}
    # Accept any property (and any attribute name) unchecked; every change is in place.
    open_properties: ClassVar[bool] = False
    # The real thing holds things of its own that a traversal converges (a nested stack):
    # a traversal comparing with reality updates it even when its properties are unchanged.
    converges_inside: ClassVar[bool] = False
    # Never changed by an update (Heat's ``_needs_update`` always False): a placeholder.
    never_updates: ClassVar[bool] = False
    # Attribute names beyond the declared ones are accepted (a group's ``resource.N.attr``).
    open_attributes: ClassVar[bool] = False
    # The real thing exists on one machine only (a file, a process): only a worker on the
    # host that made it can act on it, so its work goes to that host's queue.
    bound_to_host: ClassVar[bool] = False
    # Python packages the type needs that converge installs only with an extra, as
    # {module: extra}: a missing one is an install hint at validation, not a plugin bug.
    requires_packages: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def missing_package(cls) -> str | None:
        """What to install before this type can be used; None when nothing is missing."""
        for module, extra in cls.requires_packages.items():
            try:
                importlib.import_module(module)
            except ImportError:
                return (
                    f"{cls.type_name} needs the Python package {module!r}, which is not "
                    f"installed: pip install 'converge[{extra}]'"
                )
        return None

    @classmethod
    def schema(cls) -> ResourceTypeSchema:
        return ResourceTypeSchema(
            type_name=cls.type_name,
            properties=cls.properties_schema,
            attributes=cls.attributes_schema,
            description=cls.description,
            open_properties=cls.open_properties,
            open_attributes=cls.open_attributes,
        )

    @abstractmethod
    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        """Make the real thing; return its physical id."""

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        """Change the real thing in place, or raise ``ReplacementRequired``.

        Called only when every changed property is ``update_allowed``. The default keeps the
        physical id and data: right for types whose updatable properties need no action.
        """
        return Outcome(current.physical_id, current.data)

    def replacement_reason(
        self, current: AppliedState, properties: Mapping[str, Any]
    ) -> str | None:
        """Why updating ``current`` to ``properties`` needs a replacement, or None.

        For types that decide replacement themselves beyond ``update_allowed`` (Heat's
        ``needs_replace_with_prop_diff``). Purely computational, no side-effects: ``plan``
        asks it to predict what ``update`` will do, so ``update`` should raise
        ``ReplacementRequired`` exactly when this says so.
        """
        return None

    @abstractmethod
    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        """Remove the real thing. Idempotent: something already gone is success."""

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        """The live properties of the real thing, or None when it is gone.

        The default (no reality to read) reports what was applied.
        """
        return dict(current.properties)

    async def attributes(
        self, ctx: ResourceContext, current: AppliedState, names: Collection[str]
    ) -> Mapping[str, Any]:
        """Values of the named attributes (only names from ``attributes_schema``)."""
        return {}

    def reference_id(self, current: AppliedState) -> Any:
        """What ``get_resource`` returns for this resource (Heat: the physical id)."""
        return current.physical_id

    def validate(
        self, properties: Mapping[str, Any], ctx: ValidationContext
    ) -> Iterable[tuple[str, str]]:
        """Type-specific problems as ``(property name, message)``, before anything is made.

        ``properties`` holds only the values known before the stack exists (those that do not
        depend on other resources). Checks that need the machine (paths, commands) go here.
        """
        return ()

    def validation_template(self, properties: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """For a type whose real thing is a nested stack it writes itself (a group): a
        template of that stack to validate before anything is made, from the properties
        known now; None when there is none or it cannot be known yet."""
        return None

    def drift_diff(self, applied: Mapping[str, Any], live: Mapping[str, Any]) -> Mapping[str, str]:
        """How reality differs where the essence keeps only a digest: short texts (a
        unified diff of a file's content), keyed by the essence field each explains.

        ``applied`` and ``live`` are properties (what was applied, what ``observe`` read).
        Never diff a hidden property; the engine also drops any text that shows a hidden
        value. Purely computational, no side-effects.
        """
        return {}

    def essence(self, live: Mapping[str, Any]) -> Mapping[str, Any]:
        """The part of observed reality that matters: drop volatile fields (pure).

        Equal reality must give an equal essence: the synchronizer hashes it.
        """
        return live


class SupportsSnapshot(Protocol):
    """A type that can list every entity it can see, managed by converge or not."""

    async def list_all(self, ctx: ObserverContext) -> Mapping[str, Mapping[str, Any]]:
        """Live properties of every entity, by physical id."""
        ...


class SupportsWatch(Protocol):
    """A type whose reality pushes changes (inotify, pidfd, LISTEN …)."""

    def watch(
        self, ctx: ObserverContext, managed: Mapping[str, AppliedState]
    ) -> AsyncIterator[str]:
        """Yield physical ids whose reality may have changed (hints: the sampler observes
        them). The caller restarts the watch when the managed set changes."""
        ...
