"""Config loading: defaults, files, overrides, and errors that name the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from corpusclean.errors import ConfigError
from corpusclean.jobs.bench import BenchConfig
from corpusclean.jobs.pack import PackConfig
from corpusclean.jobs.runtime.config import (
    CleanConfig,
    dump_config,
    load_clean_config,
    load_config,
    parse_override,
)


def test_defaults_match_the_design() -> None:
    cfg = load_config(CleanConfig, "default")
    assert cfg.columns.id == "doc_id" and cfg.columns.text == "text"
    assert cfg.missing.review_threshold == pytest.approx(0.30)
    assert cfg.gate.min_retention == pytest.approx(0.70)
    assert cfg.near_dedup.threshold == pytest.approx(0.8)
    assert cfg.near_dedup.tokenizer == "auto"
    assert cfg.exact_dedup.enabled and cfg.near_dedup.enabled


def _default_yaml() -> dict:
    return yaml.safe_load(Path(__file__).parents[2].joinpath("conf", "default.yaml").read_text())


def test_every_default_key_is_documented_in_the_yaml() -> None:
    data = _default_yaml()
    resolved = CleanConfig().resolved()
    assert set(data) == set(resolved)
    for section, keys in resolved.items():
        if isinstance(keys, dict) and section != "spark":
            assert set(data[section]) == set(keys), section


def test_the_yaml_holds_the_parameter_models_defaults() -> None:
    # The models own the defaults; conf/default.yaml repeats them with their reasons.
    assert CleanConfig.model_validate(_default_yaml()) == CleanConfig()
    assert load_config(CleanConfig, "default").resolved() == CleanConfig().resolved()


# The other jobs' configs, each loaded from its own conf/<name>.yaml by `load_config`.
JOB_CONFIGS = [
    pytest.param(PackConfig, "pack", id="pack"),
    pytest.param(BenchConfig, "bench", id="bench"),
]


def _job_yaml(name: str) -> dict:
    return yaml.safe_load(Path(__file__).parents[2].joinpath("conf", f"{name}.yaml").read_text())


@pytest.mark.parametrize(("model", "name"), JOB_CONFIGS)
def test_every_key_of_a_jobs_model_is_documented_in_its_yaml(
    model: type[BaseModel], name: str
) -> None:
    data = _job_yaml(name)
    defaults = model().model_dump(mode="json")
    assert set(data) == set(defaults)
    for section, keys in defaults.items():
        if isinstance(keys, dict) and section != "spark":
            assert set(data[section]) == set(keys), section


@pytest.mark.parametrize(("model", "name"), JOB_CONFIGS)
def test_a_jobs_yaml_holds_its_models_defaults(model: type[BaseModel], name: str) -> None:
    # As for clean: the models own the defaults; the yaml repeats them with their reasons.
    assert model.model_validate(_job_yaml(name)) == model()
    assert load_config(model, name) == model()


def test_a_stage_section_holds_only_its_own_model() -> None:
    from corpusclean.pipelines.near_dedup import NearDedupParams

    cfg = CleanConfig()
    assert type(cfg.near_dedup) is NearDedupParams
    # bands x rows are resolved for the threshold in the model's validator.
    assert cfg.near_dedup.lsh == (16, 8)
    assert cfg.near_dedup.minhash.bands == 16 and cfg.near_dedup.minhash.rows == 8
    assert load_config(
        CleanConfig, "default", overrides=["near_dedup.threshold=0.5"]
    ).near_dedup.lsh != (16, 8)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["stages=[rules, doc_id, nearr]"], "stages: unknown stage 'nearr' (known: "),
        (["stages=[rules, doc_id, rules]"], "stage 'rules' is listed twice"),
        (["stages=[doc_id, rules]"], "filter 'rules' comes after dedup stage 'doc_id'"),
        (
            ["stages=[rules, doc_id, exact]", "near_dedup.threshold=0.9"],
            "section near_dedup is for stage 'near', which stages does not list",
        ),
        (["max_line_length.max_chars=5"], "section max_line_length is for stage 'max_line_length'"),
    ],
)
def test_stage_list_errors_are_one_line(overrides: list[str], named: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(named)) as err:
        load_clean_config(None, overrides)
    assert "\n" not in str(err.value)


def test_a_stage_not_listed_needs_no_section_and_is_left_out_of_the_resolved_config() -> None:
    cfg = load_clean_config(None, ["stages=[rules, max_line_length, doc_id]"])
    assert cfg.pipeline().names == ["rules", "max_line_length", "doc_id"]
    assert "near_dedup" not in cfg.resolved() and "exact_dedup" not in cfg.resolved()
    assert cfg.resolved()["max_line_length"] == {"enabled": True, "max_chars": 10_000}


def test_overrides_are_typed_and_applied_in_order() -> None:
    cfg = load_config(
        CleanConfig,
        "default",
        overrides=[
            "near_dedup.threshold=0.9",
            "near_dedup.threshold=0.85",
            "exact_dedup.enabled=false",
            "missing.numeric={quality: median}",
        ],
    )
    assert cfg.near_dedup.threshold == pytest.approx(0.85)
    assert cfg.exact_dedup.enabled is False
    assert cfg.missing.numeric == {"quality": "median"}


def test_spark_keys_keep_their_dots() -> None:
    assert parse_override("spark.sql.shuffle.partitions=7") == (
        ["spark", "spark.sql.shuffle.partitions"],
        "7",
    )
    cfg = load_config(CleanConfig, "default", overrides=["spark.sql.shuffle.partitions=7"])
    # The key reaches the session builder whole: Spark ignores `sql.shuffle.partitions`.
    assert cfg.spark == {"spark.sql.shuffle.partitions": "7"}


def test_a_spark_section_key_without_its_prefix_names_the_same_setting(tmp_path: Path) -> None:
    conf = tmp_path / "run.yaml"
    conf.write_text("spark:\n  sql.shuffle.partitions: 5\n  spark.driver.memory: 3g\n")
    cfg = load_config(CleanConfig, "default", conf)
    assert cfg.spark == {"spark.sql.shuffle.partitions": "5", "spark.driver.memory": "3g"}


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("spark.nonsense=1", "spark.nonsense is not a setting of the installed Spark"),
        ("spark.sql.shufle.partitions=4", "did you mean spark.sql.shuffle.partitions?"),
        ("spark.driver.memory=lots", "spark.driver.memory='lots' is not a size"),
        ("spark.executor.memory=1.5g", "is not a size"),
        ("spark.sql.shuffle.partitions=0", "is not a positive integer"),
        ("spark.sql.adaptive.enabled=yes please", "is not true or false"),
        ("spark.master=localhost", "is not a master URL"),
    ],
)
def test_bad_spark_settings_are_config_errors(override: str, named: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(named)):
        load_config(CleanConfig, "default", overrides=[override])


@pytest.mark.parametrize(
    "override",
    [
        "spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:9000",
        "spark.executorEnv.FOO=bar",
        "spark.rapids.sql.enabled=true",
        "spark.executor.memoryOverhead=512m",
        "spark.master=local[2]",
        "spark.network.timeout=300s",
    ],
)
def test_good_spark_settings_pass(override: str) -> None:
    cfg = load_config(CleanConfig, "default", overrides=[override])
    key, _, value = override.partition("=")
    assert cfg.spark[key] == value


def test_a_plugin_setting_passes_with_the_unchecked_switch(monkeypatch) -> None:
    monkeypatch.setenv("CORPUSCLEAN_SPARK_UNCHECKED", "1")
    cfg = load_config(CleanConfig, "default", overrides=["spark.someplugin.level=3"])
    assert cfg.spark == {"spark.someplugin.level": "3"}


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("near_dedup.treshold=0.9", "near_dedup.treshold: unknown key"),
        ("near_dedup.threshold=1.5", "near_dedup.threshold"),
        ("gate.min_retention=-1", "gate.min_retention"),
        ("near_dedup.tokenizer=bpe", "near_dedup.tokenizer"),
        ("near_dedup.keep=not a column", "near_dedup.keep"),
        ("rules.min_chars=abc", "rules.min_chars"),
        ("bogus=1", "bogus: unknown key"),
    ],
)
def test_bad_values_name_the_key(override: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        load_config(CleanConfig, "default", overrides=[override])


def test_cross_field_rules() -> None:
    with pytest.raises(ConfigError, match="min_chars"):
        load_config(CleanConfig, "default", overrides=["rules.min_chars=10", "rules.max_chars=5"])
    with pytest.raises(ConfigError, match="together"):
        load_config(CleanConfig, "default", overrides=["near_dedup.bands=4"])
    with pytest.raises(ConfigError, match="exceeds"):
        load_config(CleanConfig, "default", overrides=["near_dedup.bands=20", "near_dedup.rows=10"])


def test_config_file_then_overrides(tmp_path: Path) -> None:
    f = tmp_path / "run.yaml"
    f.write_text("near_dedup:\n  threshold: 0.9\n  ngram: 3\ngate:\n  min_retention: 0.5\n")
    cfg = load_config(CleanConfig, "default", f, ["near_dedup.ngram=7"])
    assert cfg.near_dedup.threshold == pytest.approx(0.9)
    assert cfg.near_dedup.ngram == 7
    assert cfg.gate.min_retention == pytest.approx(0.5)
    assert cfg.near_dedup.num_perm == 128  # untouched keys keep their defaults


def test_bad_config_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(CleanConfig, "default", tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("near_dedup: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(CleanConfig, "default", bad)
    seq = tmp_path / "seq.yaml"
    seq.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(CleanConfig, "default", seq)


@pytest.mark.parametrize(
    "overrides",
    [
        ["near_dedup.seed=7", "spark.sql.shuffle.partitions=3"],
        ["stages=[rules, max_line_length, doc_id, exact]", "max_line_length.max_chars=500"],
    ],
)
def test_printed_config_loads_back_to_the_same(tmp_path: Path, overrides: list[str]) -> None:
    cfg = load_clean_config(None, overrides)
    f = tmp_path / "resolved.yaml"
    f.write_text(dump_config(cfg))
    assert load_clean_config(f).resolved() == cfg.resolved()


def test_bad_override_syntax() -> None:
    with pytest.raises(ConfigError, match=r"dotted\.key=value"):
        parse_override("near_dedup.threshold")


@pytest.mark.parametrize("preset", ["fineweb", "zh-web"])
def test_a_preset_is_found_by_name_and_every_threshold_is_explained(preset: str) -> None:
    cfg = load_clean_config(preset)
    names = [
        "lang",
        "gopher_repetition",
        "gopher_quality",
        "c4_quality",
        "fineweb_quality",
    ]
    assert cfg.stages == ["rules", *names, "doc_id", "exact", "near"]
    assert cfg.gate.min_retention == 0.20
    # A preset given by path is the same config.
    path = Path(__file__).parents[2] / "conf" / "presets" / f"{preset}.yaml"
    assert load_clean_config(path).resolved() == cfg.resolved()
    # Every key of each filter section is set in the preset, under a comment.
    text = path.read_text()
    for name in names:
        section = yaml.safe_load(text)[name]
        assert set(section) == set(cfg.section(name).model_dump()) - {"enabled"}, name
        block = text.split(f"\n{name}:\n", 1)[1].split("\n\n", 1)[0]
        assert block.lstrip().startswith("#"), name


def test_an_unknown_preset_or_file_names_the_presets() -> None:
    with pytest.raises(ConfigError, match=r"does not exist \(built-in presets: fineweb, zh-web\)"):
        load_clean_config("finewbe")


def test_the_default_run_lists_no_quality_filter() -> None:
    cfg = load_clean_config()
    assert cfg.stages == ["rules", "doc_id", "exact", "near"]
    assert cfg.quality.keep_scores is False


def test_a_run_without_quality_filters_never_imports_their_kernels() -> None:
    """Every filter module is imported to read the config; their numba kernels and the
    language model load only when one is listed (start-up time of every default run)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from corpusclean.jobs.runtime.config import load_clean_config\n"
        "load_clean_config()\n"
        "heavy = ['numba', 'corpusclean.pipelines.heuristics', 'corpusclean.pipelines.langid']\n"
        "print([m for m in heavy if m in sys.modules])\n"
        "load_clean_config('fineweb', ['lang.languages=[en]'])\n"
        "print('corpusclean.pipelines.langid' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True"]
