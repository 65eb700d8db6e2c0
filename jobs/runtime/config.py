"""Typed run configs: YAML files, dotted `--set` overrides, validation that names the key.

Every job has a pydantic model whose defaults live in `conf/<job>.yaml` (shipped inside the
package, so a bare `corpusclean clean` runs on them). Loading order: the embedded YAML, then
`--config FILE`, then each `--set key=value` in order. Unknown keys and out-of-range values are
errors that name the dotted key.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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

from corpusclean.errors import ConfigError
from corpusclean.jobs.runtime.sparkconf import check_setting, normalise_key
from corpusclean.pipelines.base import (
    Pipeline,
    Roles,
    StepParams,
    build_pipeline,
    by_section,
    check_order,
    load_steps,
)
from corpusclean.pipelines.tokenizers import TokenizerSpec
from corpusclean.schemas import DEFAULT_ID_COLUMN, DEFAULT_TEXT_COLUMN

M = TypeVar("M", bound=BaseModel)


class Section(BaseModel):
    """A config section: unknown keys are errors, values are checked on assignment too."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


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
    id: str = DEFAULT_ID_COLUMN
    text: str = DEFAULT_TEXT_COLUMN
    timestamp: str = "timestamp"


class MissingSection(Section):
    review_threshold: float = Field(0.30, ge=0.0, le=1.0)
    numeric: dict[str, Literal["median", "drop"]] = Field(default_factory=dict)


class GateSection(Section):
    min_retention: float = Field(0.70, ge=0.0, le=1.0)


class AuditSection(Section):
    enabled: bool = True
    allowed_langs: list[str] = Field(default_factory=list)
    # Who evaluates the suite: `spark` (jobs/audit/expectations.py, one aggregation, no GX import)
    # or `gx` (Great Expectations on Spark); both give the same records.
    engine: Literal["spark", "gx"] = "spark"


class DedupSection(Section):
    # Dedup indexes of outputs already published (a clean output folder, or an index folder
    # `corpusclean index` built), in order of precedence; `clean --against` adds to it.
    against: list[str] = Field(default_factory=list)
    # Write DIR/index/ with the output, so a later batch can be deduplicated against it.
    index: bool = True


class QualitySection(Section):
    # Also publish every quality filter's scores (`_score_*`) in data/, beside the document,
    # so thresholds can be re-tuned on the output without computing them again.
    keep_scores: bool = False


class TokenizerSection(Section):
    """`tokens.*`: a tokenizer (pipelines/tokenizers.py) and how each document is framed.
    conf/default.yaml and conf/pack.yaml explain each key."""

    tokenizer: str | None = None
    pattern: str | None = None
    specials: dict[str, int] = Field(default_factory=dict)
    add_bos: bool | None = None
    add_eos: bool | None = None
    bos_token: str | None = None
    eos_token: str | None = None

    def spec(self) -> TokenizerSpec | None:
        """The tokenizer this section names, None when it names none."""
        if self.tokenizer is None:
            return None
        return TokenizerSpec(
            self.tokenizer,
            pattern=self.pattern,
            specials=tuple(sorted(self.specials.items())),
            add_bos=self.add_bos,
            add_eos=self.add_eos,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )


class PublishSection(Section):
    # Another host's abandoned staging under .OUTPUT.runs/ is removed once older than this.
    stale_hours: float = Field(24.0, gt=0.0)
    # Rejected runs whose staging stays for inspection (the newest ones).
    keep_rejected: int = Field(3, ge=1)


# The sections every clean run has, besides its stages' own.
_JOB_SECTIONS = (
    "input",
    "columns",
    "missing",
    "dedup",
    "gate",
    "audit",
    "publish",
    "quality",
    "tokens",
    "spark",
    "stages",
)


class CleanConfig(Section):
    """The resolved config of `corpusclean clean`.

    Besides the job's own sections it holds one section per registered stage
    (pipelines/base.py), validated by that stage's parameter model, whether `stages` lists it
    or not; a stage not listed does not run. `cfg.near_dedup` and the like are those sections.
    """

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    input: InputSection = Field(default_factory=InputSection)
    columns: ColumnsSection = Field(default_factory=ColumnsSection)
    missing: MissingSection = Field(default_factory=MissingSection)
    # The stages, in order (pipelines/base.py registers them by name); filters come first.
    stages: list[str] = Field(default_factory=lambda: ["rules", "doc_id", "exact", "near"])
    dedup: DedupSection = Field(default_factory=DedupSection)
    gate: GateSection = Field(default_factory=GateSection)
    audit: AuditSection = Field(default_factory=AuditSection)
    publish: PublishSection = Field(default_factory=PublishSection)
    quality: QualitySection = Field(default_factory=QualitySection)
    # Exact token counts in the read pass (`n_tokens`, report.json's `tokens`) when it names a
    # tokenizer.
    tokens: TokenizerSection = Field(default_factory=TokenizerSection)
    spark: SparkSettings = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _stage_sections(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        sections = by_section()
        for key in list(data):
            if key not in _JOB_SECTIONS and key not in sections:
                raise ValueError(f"{key}: unknown key (stages' sections: {', '.join(sections)})")
        for key, step in sections.items():
            given = data.get(key)
            if isinstance(given, StepParams):
                continue
            try:
                data[key] = step.Params.model_validate({} if given is None else given)
            except ValidationError as exc:
                raise ValueError(_format_validation(exc, prefix=f"{key}.")) from None
        return data

    @model_validator(mode="after")
    def _bounds(self) -> CleanConfig:
        why = check_order(self.stages)
        if why is not None:
            raise ValueError(f"stages: {why}")
        if self.columns.id == self.columns.text:
            raise ValueError("columns.id and columns.text name the same column")
        return self

    def section(self, name: str) -> StepParams:
        """The parameters of the stage whose section is `name`."""
        value = (self.__pydantic_extra__ or {})[name]
        assert isinstance(value, StepParams)
        return value

    def unlisted_sections(self) -> list[str]:
        """Sections of registered stages that `stages` does not list."""
        listed = {load_steps()[n].section_name() for n in self.stages}
        return [k for k in by_section() if k not in listed]

    def resolved(self) -> dict[str, Any]:
        """The config as a run uses it (report.json, `--print-config`): the job's sections and
        the listed stages' sections, so it can be fed back with `--config`."""
        return self.model_dump(mode="json", exclude=set(self.unlisted_sections()))

    def pipeline(self) -> Pipeline:
        """The listed stages, each built from its own section and the column roles."""
        drop = tuple(c for c, how in self.missing.numeric.items() if how == "drop")
        c = self.columns
        roles = Roles(id=c.id, text=c.text, timestamp=c.timestamp, required=drop)
        sections = {k: self.section(k) for k in by_section()}
        return build_pipeline(self.stages, sections, roles)


# Audit parameters whose stage is not listed, so its check passes vacuously.
_AUDIT_NEUTRAL: dict[str, object] = {"min_chars": 0, "max_chars": 2**31 - 1, "exact_dedup": False}


def audit_stage_params(pipe: Pipeline) -> dict[str, object]:
    """The clean_docs suite's stage parameters: the listed, enabled stages' own (min/max chars
    of `rules`, whether `exact` runs), neutral values for the rest."""
    return {**_AUDIT_NEUTRAL, **pipe.audit_params()}


def load_clean_config(
    config_file: str | Path | None = None, overrides: list[str] | None = None
) -> CleanConfig:
    """`clean`'s config (load_config), refusing a section the user wrote for a stage that
    `stages` does not list: it would be silently ignored."""
    with clean_config_file(config_file) as path:
        cfg = load_config(CleanConfig, "default", path, overrides)
        given = set(read_yaml(path)) if path is not None else set()
    given |= {parse_override(item)[0][0] for item in overrides or []}
    steps = by_section()
    for key in cfg.unlisted_sections():
        if key in given:
            raise ConfigError(
                f"invalid config: section {key} is for stage {steps[key].name!r}, which stages "
                f"does not list (stages: {', '.join(cfg.stages)}); add it or drop the section"
            )
    return cfg


def embedded_yaml(name: str) -> dict[str, Any]:
    """The YAML config shipped with the package as `conf/<name>.yaml`."""
    text = resources.files("corpusclean.conf").joinpath(f"{name}.yaml").read_text("utf-8")
    return yaml.safe_load(text) or {}


def presets() -> list[str]:
    """The names of the built-in presets (conf/presets/*.yaml), for `--config NAME`."""
    folder = resources.files("corpusclean.conf.presets")
    return sorted(f.name[:-5] for f in folder.iterdir() if f.name.endswith(".yaml"))


@contextmanager
def clean_config_file(path: str | Path | None) -> Iterator[Path | None]:
    """A clean run's `--config` as a file: the file itself, or the built-in preset of that
    name (`fineweb`) when no such file exists (extracted for the duration when the package is
    a zip, as on executors given `--py-files`); a one-line error naming the presets when
    neither exists."""
    if path is None or Path(path).is_file():
        yield None if path is None else Path(path)
        return
    if str(path) not in presets():
        raise ConfigError(
            f"config file {path} does not exist (built-in presets: {', '.join(presets())})"
        )
    preset = resources.files("corpusclean.conf.presets").joinpath(f"{path}.yaml")
    with resources.as_file(preset) as local:
        yield local


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


def _format_validation(exc: ValidationError, prefix: str = "") -> str:
    parts = []
    for err in exc.errors():
        msg = err["msg"].removeprefix("Value error, ")
        key = ".".join(str(p) for p in err["loc"])
        if not key and not prefix:
            parts.append(msg)  # a whole-model check that names its keys itself
            continue
        key = prefix + key if key else prefix.rstrip(".")
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
    data = config.resolved() if isinstance(config, CleanConfig) else config.model_dump(mode="json")
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
