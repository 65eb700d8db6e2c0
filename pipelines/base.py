"""The step protocol of `clean`: filters and dedup stages, registered by name.

`clean` runs the stages `conf/default.yaml` lists under `stages:`, in that order. Every stage is
one class registered here, with its parameters in its own config section:

- a **filter** rejects rows. It gives either a Spark `Column` expression that is the reject
  reason (`reason()`: null keeps the row), or an Arrow batch scorer (`score()`:
  `pa.RecordBatch -> score columns`) plus a keep rule over those scores (`verdict()`: the reason
  per row, null to keep). A scorer's keep rule is usually a list of rules checked in order
  (`keep_rules()`: `Bound`s on one score each, `Check`s for the rest), written once: the
  verdict and the bounds the report sets each score against (`bounds()`) both come from it.
  Expression filters need nothing from Python; scorers all run inside the one `mapInArrow`
  read pass that also computes the dedup features, so the text crosses to Python once however
  many scorers are on.
- a **dedup stage** removes all but one member of each duplicate group, choosing the survivor
  by its `keep` policy. A *window* stage marks losers with a pure frame transformation over
  the narrow frame (`mark()`: consecutive window stages are computed in one write); a
  *cluster* stage finds clusters with driver-side steps (`find_clusters()`: the job supplies
  how intermediate frames are materialised) and the job marks the losers.

Every stage sees only its own section (a `StepParams` model that owns its defaults) and the
job's column roles (`Roles`); `check()` refuses an input schema that lacks what the stage
reads before any plan runs (Spark ML's `transformSchema` idea). Everything downstream — the
funnel, `removed`, `rejected/` (`reject_stage`), `duplicates/` (`stage`), report.json and the
audit's parameters — takes the stage names from here.

A new stage is one module: a class with `@register`, in `pipelines/filters/` (imported by
`load_steps()`), in one of the built-in modules, or in another package that names its module
under the `corpusclean.steps` entry-point group.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Annotated, Any, ClassVar, Literal, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyspark.sql.functions as F
from pydantic import AfterValidator, BaseModel, ConfigDict
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import DataType, NumericType, StructField, TimestampType

from corpusclean import schemas
from corpusclean.pipelines.columns import AGAINST, STAGE
from corpusclean.pipelines.minhash import MinHashParams
from corpusclean.pipelines.prior import PriorIndex

_COLUMN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
# Modules holding the built-in stages, imported by `load_steps()` before the registry is read.
_BUILTIN = (
    "corpusclean.pipelines.rules",
    "corpusclean.pipelines.dedup",
    "corpusclean.pipelines.near_dedup",
)
_FILTERS_PACKAGE = "corpusclean.pipelines.filters"
ENTRY_POINTS = "corpusclean.steps"
# Names a stage or its section cannot take: the job's own config sections and report keys.
RESERVED_NAMES = frozenset(
    {
        "input",
        "columns",
        "missing",
        "gate",
        "audit",
        "publish",
        "spark",
        "stages",
        "read",
        "write",
        "config",
        "removed",
        "rejected",
        "bad_lines",
        "quality",
    }
)


class StepParams(BaseModel):
    """A stage's config section: unknown keys are errors, values are checked on assignment.

    `enabled: false` keeps a listed stage in the funnel (as `disabled`) without running it.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    enabled: bool = True


def _check_keep(value: str) -> str:
    if value in ("longest", "newest") or _COLUMN_RE.match(value):
        return value
    raise ValueError("must be 'longest', 'newest' or the name of a numeric column")


# A survivor ordering: `longest` (most characters), `newest` (latest value of the timestamp
# column) or the name of a numeric column (highest value wins). Ties always fall back to a
# content hash and then the doc_id, so the choice never depends on partitioning.
KeepRule = Annotated[str, AfterValidator(_check_keep)]


@dataclass(frozen=True)
class Roles:
    """The job-level column roles a stage may read (config `columns`), and the numeric columns
    whose nulls reject a row (`missing.numeric: drop`)."""

    id: str = schemas.DEFAULT_ID_COLUMN
    text: str = schemas.DEFAULT_TEXT_COLUMN
    timestamp: str = "timestamp"
    required: tuple[str, ...] = ()


class StageRun(Protocol):
    """What the job lends a cluster stage: its session, the number of rows coming in (known to
    the job, so a stage can size its plan without a job of its own), a way to materialise a
    frame once (so later steps do not recompute its lineage), and the texts of rows for the few
    that need them."""

    spark: SparkSession
    rows_in: int

    def materialise(self, df: DataFrame, name: str) -> DataFrame: ...

    def texts(self) -> DataFrame: ...


class Step(ABC):
    """One stage: a name, a config section, its parameters and the columns it reads."""

    name: ClassVar[str]
    section: ClassVar[str] = ""  # defaults to `name`
    Params: ClassVar[type[StepParams]] = StepParams
    kind: ClassVar[Literal["filter", "dedup"]]

    def __init__(self, params: StepParams, roles: Roles) -> None:
        self.params = params
        self.roles = roles

    @classmethod
    def section_name(cls) -> str:
        return cls.section or cls.name

    @property
    def enabled(self) -> bool:
        return self.params.enabled

    def reads(self) -> list[str]:
        """Input columns this stage reads (besides the bookkeeping columns)."""
        return []

    def check(self, fields: Mapping[str, DataType]) -> str | None:
        """Why an input with these columns cannot run this stage (None when it can).

        The default checks that every column of `reads()` exists.
        """
        for name in self.reads():
            if name not in fields:
                return f"stage {self.name} reads column {name!r}, which the input lacks"
        return None

    def audit_params(self) -> dict[str, object]:
        """Parameters this stage gives the clean_docs quality suite."""
        return {}


class ScoreValues(Mapping[str, np.ndarray]):
    """One batch's score columns as a keep rule reads them: `values[name]` is the column as
    float64 numpy, NaN where the score is null, converted once however many rules read it.
    `arrays` holds the columns as `score()` gave them, for a rule over a score that is not a
    number (a language code)."""

    def __init__(self, arrays: Mapping[str, pa.Array]) -> None:
        self.arrays = arrays
        self._numpy: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._numpy:
            column = self.arrays[name].to_numpy(zero_copy_only=False)
            self._numpy[name] = np.asarray(column, dtype=np.float64)
        return self._numpy[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.arrays)

    def __len__(self) -> int:
        return len(self.arrays)

    @property
    def rows(self) -> int:
        """The rows of the batch."""
        return len(next(iter(self.arrays.values()), ()))


# A row mask over a batch's scores: True where the row breaks the rule (`Check.test`), or
# where a `Bound` does not apply to it (`Bound.unless`).
RowMask = Callable[[ScoreValues], np.ndarray]


@dataclass(frozen=True)
class Bound:
    """A keep rule that is a threshold on one score: a kept row's `score` is `>=` or `<=`
    `value`; a row outside it is rejected with `reason`. `value` None turns the rule off.

    A null score breaks no bound (a document the score is undefined for is judged by the other
    rules, or by a `Check` of its own). Rows where `unless` holds are exempt (FineWeb's
    `line_punct_exclude_zero`)."""

    reason: str
    score: str
    op: Literal[">=", "<="]
    value: float | None
    unless: RowMask | None = None

    def broken(self, values: ScoreValues) -> np.ndarray:
        """The rows outside the bound, and not exempt (nothing when the rule is off)."""
        if self.value is None:
            return np.zeros(values.rows, dtype=bool)
        score = values[self.score]
        # NaN compares False either way: a null score stays inside.
        out = score < self.value if self.op == ">=" else score > self.value
        if self.unless is not None:
            out &= ~self.unless(values)
        return out


@dataclass(frozen=True)
class Check:
    """A keep rule that is not a threshold on one score (a null score, an order between two
    scores): `test` is True on the rows rejected with `reason`."""

    reason: str
    test: RowMask

    def broken(self, values: ScoreValues) -> np.ndarray:
        """The rows `test` rejects."""
        return np.asarray(self.test(values), dtype=bool)


Rule = Bound | Check


def first_reason(rules: Sequence[tuple[str, np.ndarray]], n: int) -> pa.Array:
    """Per row, the name of the first rule whose mask holds, null where none does (`rules` in
    the order they are checked in: a filter's keep rules follow its reference implementation's
    order, so a row breaking several gets the same reason)."""
    codes = np.full(n, -1, dtype=np.int32)
    for i in range(len(rules) - 1, -1, -1):
        codes[rules[i][1]] = i
    if not rules:
        return pa.nulls(n, pa.string())
    dictionary = pa.array([name for name, _ in rules], pa.string())
    indices = pa.array(codes, mask=codes < 0, type=pa.int32())
    return pa.DictionaryArray.from_arrays(indices, dictionary).cast(pa.string())


class Filter(Step):
    """A stage that rejects rows, each with a reason.

    Implement `reason()` (a Spark expression), or `score_fields()` + `score()` and a keep rule:
    `keep_rules()`, or `verdict()` for one they cannot say (an Arrow scorer, run in the read
    pass on the rows still in the corpus).
    """

    kind: ClassVar[Literal["filter", "dedup"]] = "filter"

    @property
    def publishes(self) -> dict[str, str]:
        """Score columns this filter publishes in data/ as columns of their own, by the name
        they take there (language ID's `lang`, `lang_score`); other scores go only to
        rejected/ unless `quality.keep_scores` is on."""
        return {}

    def check(self, fields: Mapping[str, DataType]) -> str | None:
        why = super().check(fields)
        if why is not None:
            return why
        for column in self.publishes.values():
            if column in fields:
                return (
                    f"stage {self.name} adds column {column!r} to data/, and the input already "
                    f"has a column {column!r}; name the stage's column otherwise (see its "
                    f"section {self.section_name()}), rename the input's column, or drop the "
                    "stage"
                )
        return None

    def keep_rules(self) -> Sequence[Rule]:
        """The keep rule over `score()`'s columns as rules checked in order: a row is rejected
        with the reason of the first rule it breaks. Empty keeps every row."""
        return []

    def bounds(self) -> list[tuple[str, str, float]]:
        """The keep rule's thresholds as (score column, `>=` or `<=`, bound): what a kept
        document's score must satisfy (the report sets each score's distribution against it).
        The default is every `Bound` of `keep_rules()` that is on, in order."""
        return [
            (rule.score, rule.op, float(rule.value))
            for rule in self.keep_rules()
            if isinstance(rule, Bound) and rule.value is not None
        ]

    def reason(self) -> Column | None:
        """The reject reason of each row as a Spark expression (null keeps the row)."""
        return None

    def score_fields(self) -> list[pa.Field]:
        """The score columns `score()` returns (empty for an expression filter)."""
        return []

    def score(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        """Scores of every row of `batch` (it holds the columns of `reads()` and the text)."""
        raise NotImplementedError(f"{type(self).__name__} has no Arrow scorer")

    def verdict(self, scores: Mapping[str, pa.Array]) -> pa.Array:
        """The keep rule over `score()`'s columns: a reason string per row, null to keep. The
        default checks `keep_rules()`."""
        values = ScoreValues(scores)
        rules = [
            (rule.reason, rule.broken(values))
            for rule in self.keep_rules()
            if not (isinstance(rule, Bound) and rule.value is None)
        ]
        return first_reason(rules, values.rows)

    @property
    def scores(self) -> bool:
        return bool(self.score_fields())


class TextFeature(ABC):
    """A per-document feature computed from the text in the read pass (a dedup stage's input)."""

    @abstractmethod
    def fields(self) -> list[StructField]:
        """The columns `compute` returns."""

    @abstractmethod
    def compute(self, texts: pa.Array) -> dict[str, pa.Array]:
        """The feature columns for `texts` (the rows still in the corpus), one value each."""


class Dedup(Step):
    """A stage that keeps one member of each duplicate group.

    `cluster_col` is the bookkeeping column where it records group membership (the survivor's
    doc_id for every member of a group of two or more); `duplicates()` turns it into rows of
    duplicates/. A window stage implements `mark()`; a cluster stage `find_clusters()`.
    """

    kind: ClassVar[Literal["filter", "dedup"]] = "dedup"
    cluster_col: ClassVar[str]
    clusters_on_driver: ClassVar[bool] = False  # True: find_clusters, else mark
    # The heading of a cluster stage's part of report.html (its figures, its examples).
    title: ClassVar[str] = ""
    # Whether the report shows a sample of the documents this stage removed beside the one each
    # one's cluster kept (`examples[name]`): the job samples them, reads their texts in its
    # data write, and `example_pairs` makes the pairs.
    shows_pairs: ClassVar[bool] = False
    # Indexes of outputs already published (pipelines/prior.py), lent by the job for
    # `clean --against`: a row that duplicates one of their documents is removed, the prior
    # document always wins. Empty: the stage dedups within the batch only.
    priors: Sequence[PriorIndex] = ()
    # The rows of the frame a window stage marks (removed ones included), set by the job
    # before `mark()` when it knows them (None: unknown): a small batch's keys are broadcast
    # to a prior index's scan.
    batch_rows: int | None = None

    def against(self, priors: Sequence[PriorIndex]) -> None:
        """Take the prior indexes this run dedups against (`clean --against`)."""
        self.priors = tuple(priors)

    @property
    def keep(self) -> str:
        return str(getattr(self.params, "keep", "longest"))

    def order_columns(self) -> list[str]:
        """Input columns the survivor policy reads (the timestamp or the keep column)."""
        if self.keep == "longest":
            return []
        return [self.roles.timestamp if self.keep == "newest" else self.keep]

    def reads(self) -> list[str]:
        return self.order_columns()

    def check(self, fields: Mapping[str, DataType]) -> str | None:
        key = f"{self.section_name()}.keep"
        for name in self.order_columns():
            if name not in fields:
                return f"{key}={self.keep} needs column {name!r}, which the input lacks"
            dtype = fields[name]
            allowed = (TimestampType, NumericType) if self.keep == "newest" else (NumericType,)
            if not isinstance(dtype, allowed):
                return f"{key}={self.keep}: column {name!r} is {dtype.simpleString()}"
        return None

    def text_features(self) -> list[TextFeature]:
        """Features this stage needs from the text, computed in the read pass."""
        return []

    def signature_params(self) -> MinHashParams | None:
        """The MinHash parameters of the signatures this stage reads from the read pass: a
        dedup index keeps them, and a prior index must have been built with the same ones
        (`clean --against`). None: the stage reads no signature."""
        return None

    def example_pairs(
        self, picked: Sequence[ExamplePick], removed: Mapping[int, str], kept: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        """With `shows_pairs`: report.json's `examples[name]` from the sampled removed rows
        `picked`, the texts of those rows (`removed`, by row id) and of their survivors
        (`kept`, by doc_id). Each pair has `kept`, `removed` (doc_ids), `kept_text` and
        `removed_text` (whole: the job cuts them for the page), and the figures the stage
        adds; a stage may keep only some of them."""
        return []

    def mark(self, df: DataFrame) -> DataFrame:
        """Window stage: set `_stage` to this stage's name on losers, fill `cluster_col`."""
        raise NotImplementedError(f"{type(self).__name__} is not a window stage")

    def find_clusters(
        self, candidates: DataFrame, run: StageRun
    ) -> tuple[DataFrame, dict[str, Any]]:
        """Cluster stage: `(_rid, cluster_id)` for members of clusters of two or more among
        `candidates` (the rows still in the corpus, with their features), and the figures the
        report shows under this stage's section."""
        raise NotImplementedError(f"{type(self).__name__} is not a cluster stage")

    def summary(self, figures: dict[str, Any]) -> str | None:
        """One log line from `find_clusters`' figures (None: nothing to add)."""
        return None

    def duplicates(self, df: DataFrame) -> DataFrame:
        """Rows of duplicates/ (`doc_id, cluster_id, stage, kept`) from `cluster_col`."""
        doc = F.col(self.roles.id)
        cluster = F.col(self.cluster_col)
        against = self.against_column(df)
        kept = doc == cluster
        if against is not None:
            kept = kept & against.isNull()
        return df.filter(cluster.isNotNull()).select(
            doc.alias(schemas.DOC_ID),
            cluster.alias(schemas.CLUSTER_ID),
            F.lit(self.name).alias(schemas.DUP_STAGE),
            kept.alias(schemas.KEPT),
            *([] if against is None else [against.alias(schemas.AGAINST)]),
        )

    def against_column(self, df: DataFrame) -> Column | None:
        """duplicates/' `against` of this stage's rows (the prior index a row duplicates, null
        within the batch); None when the run names no prior index (no such column)."""
        if not self.priors:
            return None
        if AGAINST not in df.columns:
            return F.lit(None).cast("string")
        return F.when(F.col(STAGE) == F.lit(self.name), F.col(AGAINST))


@dataclass(frozen=True)
class ExamplePick:
    """A row a dedup stage removed, sampled for the report: its row id, its doc_id and the
    doc_id of the document its cluster kept."""

    rid: int
    doc_id: str
    kept: str


S = TypeVar("S", bound=type[Step])
_REGISTRY: dict[str, type[Step]] = {}


class RegistryError(ValueError):
    """A stage class that cannot be registered (bad or taken name, wrong kind)."""


def register(cls: S) -> S:
    """Class decorator: make a stage available to `stages:` under its `name`."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise RegistryError(f"{cls.__name__}.name must be a lower_snake_case name, got {name!r}")
    section = cls.section_name()
    if name in RESERVED_NAMES or section in RESERVED_NAMES:
        raise RegistryError(f"stage name or section {name!r}/{section!r} is reserved by the job")
    if not issubclass(cls, Filter | Dedup):
        raise RegistryError(f"{cls.__name__} must subclass Filter or Dedup")
    for other in _REGISTRY.values():
        if other is cls or (other.__qualname__ == cls.__qualname__ and other.name == name):
            continue  # a module imported twice (tests, reloads) registers the same class again
        if name in (other.name, other.section_name()) or section in (
            other.name,
            other.section_name(),
        ):
            raise RegistryError(
                f"stage {name!r} (section {section!r}) clashes with {other.__name__} "
                f"({other.name!r}, section {other.section_name()!r})"
            )
    _REGISTRY[name] = cls
    return cls


def unregister(name: str) -> None:
    """Remove a stage (tests that register their own)."""
    _REGISTRY.pop(name, None)


_loaded = False


def load_steps() -> dict[str, type[Step]]:
    """Every registered stage by name, after importing the built-in modules, the modules of
    `pipelines/filters/` and the `corpusclean.steps` entry points."""
    global _loaded
    if not _loaded:
        for module in _BUILTIN:
            importlib.import_module(module)
        package = importlib.import_module(_FILTERS_PACKAGE)
        for info in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{_FILTERS_PACKAGE}.{info.name}")
        for ep in metadata.entry_points(group=ENTRY_POINTS):
            importlib.import_module(ep.value.split(":")[0])
        _loaded = True
    return dict(_REGISTRY)


def by_section() -> dict[str, type[Step]]:
    """Every registered stage by its config section."""
    return {cls.section_name(): cls for cls in load_steps().values()}


def check_order(names: Sequence[str]) -> str | None:
    """Why a `stages:` list cannot run (None when it can): unknown or repeated names, or a
    filter after a dedup stage (filters run in the read pass, before any dedup)."""
    steps = load_steps()
    seen: set[str] = set()
    dedup_seen: str | None = None
    for name in names:
        if name not in steps:
            return f"unknown stage {name!r} (known: {', '.join(sorted(steps))})"
        if name in seen:
            return f"stage {name!r} is listed twice"
        seen.add(name)
        if steps[name].kind == "dedup":
            dedup_seen = dedup_seen or name
        elif dedup_seen is not None:
            return (
                f"filter {name!r} comes after dedup stage {dedup_seen!r}; filters run in the "
                "read pass, so list them before every dedup stage"
            )
    return None


@dataclass(frozen=True)
class Pipeline:
    """The listed stages, built from their sections, in order."""

    steps: tuple[Step, ...]
    roles: Roles = field(default_factory=Roles)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    @property
    def filters(self) -> list[Filter]:
        return [s for s in self.steps if isinstance(s, Filter)]

    @property
    def dedups(self) -> list[Dedup]:
        return [s for s in self.steps if isinstance(s, Dedup)]

    def enabled(self) -> list[Step]:
        return [s for s in self.steps if s.enabled]

    def step(self, name: str) -> Step | None:
        return next((s for s in self.steps if s.name == name), None)

    def scorers(self) -> list[Filter]:
        """The enabled filters with an Arrow scorer (they run in the read pass)."""
        return [f for f in self.filters if f.enabled and f.scores]

    def published(self, keep_scores: bool) -> list[tuple[str, str]]:
        """(score column, name in data/) of every score the output publishes: the columns
        filters publish as their own, and with `keep_scores` every other score as it is."""
        out: list[tuple[str, str]] = []
        for f in self.scorers():
            named = dict(f.publishes)
            for score in f.score_fields():
                if score.name in named:
                    out.append((score.name, named[score.name]))
                elif keep_scores:
                    out.append((score.name, score.name))
        return out

    def text_features(self) -> list[TextFeature]:
        """The features the enabled dedup stages need from the text, in stage order."""
        return [x for d in self.dedups if d.enabled for x in d.text_features()]

    def signature_params(self) -> MinHashParams | None:
        """The MinHash parameters of the enabled stage that reads signatures (near-dedup),
        which the run's dedup index keeps; None when no such stage runs."""
        for step in self.dedups:
            params = step.signature_params() if step.enabled else None
            if params is not None:
                return params
        return None

    def dedup_sections(self) -> list[str]:
        """The config sections of the listed dedup stages: with `columns`, `input` and
        `stages`, all a dedup index's content depends on."""
        return [step.section_name() for step in self.dedups]

    def check(self, fields: Mapping[str, DataType]) -> tuple[Step, str] | None:
        """The first enabled stage that cannot run on these input columns, and why."""
        for step in self.enabled():
            why = step.check(fields)
            if why is not None:
                return step, why
        return None

    def order_columns(self) -> list[str]:
        """Input columns the enabled dedup stages' survivor policies read, each once."""
        cols: list[str] = []
        for step in self.dedups:
            if step.enabled:
                cols.extend(c for c in step.order_columns() if c not in cols)
        return cols

    def audit_params(self) -> dict[str, object]:
        params: dict[str, object] = {}
        for step in self.enabled():
            params.update(step.audit_params())
        return params


def build_pipeline(
    names: Iterable[str], sections: Mapping[str, StepParams], roles: Roles
) -> Pipeline:
    """The stages `names` lists, each given only its own section of `sections`."""
    steps = load_steps()
    built = []
    for name in names:
        cls = steps[name]
        built.append(cls(sections.get(cls.section_name()) or cls.Params(), roles))
    return Pipeline(tuple(built), roles)


def funnel_aggregates(names: Iterable[str]) -> list[Column]:
    """Aggregates over a marked frame giving the rows each named stage removed (one pass)."""
    return [F.count(F.lit(1)).alias("rows")] + [
        F.sum((F.col(STAGE) == F.lit(n)).cast("long")).alias(n) for n in names
    ]


# Quantiles of each score the report shows (approximate, 1/10,000 relative error).
SCORE_QUANTILES = (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99)


def _numeric(field: pa.Field) -> bool:
    return pa.types.is_integer(field.type) or pa.types.is_floating(field.type)


def score_aggregates(filters: Iterable[Filter], sampled: Column | None = None) -> list[Column]:
    """Aggregates over the read pass's output giving each numeric score's distribution: the
    rows scored, min, max, quantiles, and per keep-rule bound the scored rows outside it (they
    ride on the read pass's own observation: no pass of their own).

    The quantiles are of the rows where `sampled` holds (every row when None): a quantile
    sketch costs more per row than all the counts together, and a fixed share of the rows
    draws the same distribution. The counts, min and max are of every row."""
    out: list[Column] = []
    for f in filters:
        bounds = f.bounds()
        for score_field in f.score_fields():
            if not _numeric(score_field):
                continue
            col = F.col(score_field.name)
            key = f"__q{score_field.name}"
            out += [
                F.count(col).alias(f"{key}#n"),
                F.min(col).alias(f"{key}#min"),
                F.max(col).alias(f"{key}#max"),
                F.percentile_approx(
                    col if sampled is None else F.when(sampled, col),
                    list(SCORE_QUANTILES),
                    10_000,
                ).alias(f"{key}#q"),
            ]
            for i, (score, op, value) in enumerate(bounds):
                if score == score_field.name:
                    outside = col < F.lit(value) if op == ">=" else col > F.lit(value)
                    out.append(F.sum(outside.cast("long")).alias(f"{key}#out{i}"))
    return out


def score_summary(filters: Iterable[Filter], values: Mapping[str, Any]) -> dict[str, Any]:
    """report.json's `quality`: per filter, per numeric score, its distribution over the rows
    it scored and each bound with the rows outside it (from `score_aggregates`' values)."""
    report: dict[str, Any] = {}
    for f in filters:
        bounds = f.bounds()
        scores: dict[str, Any] = {}
        for score_field in f.score_fields():
            key = f"__q{score_field.name}"
            if not _numeric(score_field) or f"{key}#n" not in values:
                continue
            quantiles = values.get(f"{key}#q") or [None] * len(SCORE_QUANTILES)
            scores[score_field.name] = {
                "scored": int(values.get(f"{key}#n") or 0),
                "min": values.get(f"{key}#min"),
                "max": values.get(f"{key}#max"),
                "quantiles": {
                    f"p{round(q * 100):02d}": v
                    for q, v in zip(SCORE_QUANTILES, quantiles, strict=True)
                },
                "bounds": [
                    {"op": op, "value": value, "outside": int(values.get(f"{key}#out{i}") or 0)}
                    for i, (score, op, value) in enumerate(bounds)
                    if score == score_field.name
                ],
            }
        report[f.name] = {"scores": scores}
    return report
