"""Typed run configs: YAML files, dotted `--set` overrides, validation that names the key.

Every job has a pydantic model whose defaults live in `conf/<job>.yaml` (shipped inside the
package, so a bare `corpusclean clean` runs on them). Loading order: the embedded YAML, then
`--config FILE`, then each `--set key=value` in order. Unknown keys and out-of-range values are
errors that name the dotted key.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from corpusclean.jobs.errors import ConfigError
from corpusclean.jobs.sparkconf import check_setting, normalise_key

M = TypeVar("M", bound=BaseModel)

_COLUMN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Section(BaseModel):
    """A config section: unknown keys are errors, values are checked on assignment too."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _check_keep(value: str) -> str:
    if value in ("longest", "newest") or _COLUMN_RE.match(value):
        return value
    raise ValueError("must be 'longest', 'newest' or the name of a numeric column")


# A survivor ordering: `longest` (most characters), `newest` (latest value of the timestamp
# column) or the name of a numeric column (highest value wins). Ties always fall back to a
# content hash and then the doc_id, so the choice never depends on partitioning.
KeepRule = Annotated[str, AfterValidator(_check_keep)]


def _spark_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _spark_strings(value: Any) -> Any:
    if isinstance(value, dict):
        return {normalise_key(str(k)): _spark_str(v) for k, v in value.items()}
    return value


def _check_spark(settings: dict[str, str]) -> dict[str, str]:
    for key, value in settings.items():
        why = check_setting(key, value)
        if why is not None:
            raise ValueError(why)
    return settings


# A job's `spark:` section: full Spark keys (`sql.x` is read as `spark.sql.x`), each checked
# against the installed Spark before it starts; Spark takes every value as a string.
SparkSettings = Annotated[
    dict[str, str], BeforeValidator(_spark_strings), AfterValidator(_check_spark)
]


class InputSection(Section):
    format: Literal["auto", "parquet", "jsonl"] = "auto"
    bad_lines: Literal["fail", "reject"] = "fail"


class ColumnsSection(Section):
    id: str = "doc_id"
    text: str = "text"
    timestamp: str = "timestamp"


class MissingSection(Section):
    review_threshold: float = Field(0.30, ge=0.0, le=1.0)
    numeric: dict[str, Literal["median", "drop"]] = Field(default_factory=dict)


class RulesSection(Section):
    min_chars: int = Field(100, ge=0)
    max_chars: int = Field(1_000_000, ge=1)


class DedupSection(Section):
    enabled: bool = True
    keep: KeepRule = "longest"


class DocIdDedupSection(Section):
    keep: KeepRule = "longest"


class NearDedupSection(Section):
    enabled: bool = True
    threshold: float = Field(0.8, gt=0.0, lt=1.0)
    num_perm: int = Field(128, ge=16, le=1024)
    ngram: int = Field(5, ge=1, le=64)
    char_ngram: int = Field(5, ge=1, le=64)
    tokenizer: Literal["word", "char", "auto"] = "auto"
    seed: int = Field(42, ge=0)
    keep: KeepRule = "longest"
    bands: int | None = Field(None, ge=1)
    rows: int | None = Field(None, ge=1)
    false_positive_weight: float = Field(0.05, ge=0.0, le=1.0)
    verify: bool = True
    exact_margin: float = Field(0.1, ge=0.0, le=1.0)
    max_bucket: int = Field(0, ge=0)
    union_find_max_edges: int = Field(5_000_000, ge=0)
    max_iterations: int = Field(64, ge=1)

    @model_validator(mode="after")
    def _bands_fit(self) -> NearDedupSection:
        if (self.bands is None) != (self.rows is None):
            raise ValueError("near_dedup.bands and near_dedup.rows are set together or not at all")
        if (
            self.bands is not None
            and self.rows is not None
            and (self.bands * self.rows > self.num_perm)
        ):
            raise ValueError(
                f"near_dedup.bands x near_dedup.rows = {self.bands * self.rows} exceeds "
                f"near_dedup.num_perm = {self.num_perm}"
            )
        return self


class GateSection(Section):
    min_retention: float = Field(0.70, ge=0.0, le=1.0)


class AuditSection(Section):
    enabled: bool = True
    allowed_langs: list[str] = Field(default_factory=list)


class PublishSection(Section):
    # Another host's abandoned staging under .OUTPUT.runs/ is removed once older than this.
    stale_hours: float = Field(24.0, gt=0.0)
    # Rejected runs whose staging stays for inspection (the newest ones).
    keep_rejected: int = Field(3, ge=1)


class CleanConfig(Section):
    """The resolved config of `corpusclean clean`."""

    input: InputSection = Field(default_factory=InputSection)
    columns: ColumnsSection = Field(default_factory=ColumnsSection)
    missing: MissingSection = Field(default_factory=MissingSection)
    rules: RulesSection = Field(default_factory=RulesSection)
    doc_id_dedup: DocIdDedupSection = Field(default_factory=DocIdDedupSection)
    exact_dedup: DedupSection = Field(default_factory=DedupSection)
    near_dedup: NearDedupSection = Field(default_factory=NearDedupSection)
    gate: GateSection = Field(default_factory=GateSection)
    audit: AuditSection = Field(default_factory=AuditSection)
    publish: PublishSection = Field(default_factory=PublishSection)
    spark: SparkSettings = Field(default_factory=dict)

    @model_validator(mode="after")
    def _bounds(self) -> CleanConfig:
        if self.rules.min_chars > self.rules.max_chars:
            raise ValueError(
                f"rules.min_chars ({self.rules.min_chars}) is above rules.max_chars "
                f"({self.rules.max_chars})"
            )
        if self.columns.id == self.columns.text:
            raise ValueError("columns.id and columns.text name the same column")
        return self


def embedded_yaml(name: str) -> dict[str, Any]:
    """The YAML config shipped with the package as `conf/<name>.yaml`."""
    text = resources.files("corpusclean.conf").joinpath(f"{name}.yaml").read_text("utf-8")
    return yaml.safe_load(text) or {}


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from a file, with a one-line error when it is missing or malformed."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist")
    try:
        data = yaml.safe_load(p.read_text("utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {p} is not valid YAML{where}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} must hold a mapping of sections, not a {type(data)}")
    return data


def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a", "b", "c"], value), the value read as a YAML scalar.

    `spark.*` keys are one key of the `spark` section, whole, because Spark's own keys have dots.
    """
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {item!r}: expected dotted.key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    if key.startswith("spark."):
        return ["spark", key], raw
    return key.split("."), value


def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "spark":
            out[k] = _merge(out[k], v)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def _set_path(data: dict[str, Any], path: list[str], value: Any) -> None:
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if child is None:
            child = {}
            node[part] = child
        if not isinstance(child, dict):
            raise ConfigError(f"--set {'.'.join(path)}: {part} is not a section")
        node = child
    node[path[-1]] = value


def _format_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "config"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        parts.append(f"{key}: {msg}")
    return "; ".join(parts)


def load_config(
    model: type[M],
    embedded: str,
    config_file: str | Path | None = None,
    overrides: list[str] | None = None,
) -> M:
    """Resolve a job's config: embedded defaults, then the user's file, then `--set` overrides."""
    data = embedded_yaml(embedded)
    if config_file is not None:
        data = _merge(data, read_yaml(config_file))
    for item in overrides or []:
        path, value = parse_override(item)
        _set_path(data, path, value)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid config: {_format_validation(exc)}") from exc


def dump_config(config: BaseModel) -> str:
    """The resolved config as YAML, the form `--print-config` shows and a run can reuse."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
