//! Writing an export: a run's row, its steps' rows and outcome rows, buffered a row group
//! per table and written as each group fills.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;

use observe::Outcome;
use parquet::basic::Compression;
use parquet::data_type::ByteArray;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use policy::{RunRecord, VersionKey};

use crate::columns::{length, text, unsigned, Column, Leaf};
use crate::error::RunsParquetError;
use crate::Table;

/// Runs buffered before a row group of `runs.parquet` is written…
pub const RUNS_PER_GROUP: usize = 8_192;
/// …or bytes of their records, whichever comes first: a record with long outputs and its
/// top alternatives runs to tens of kilobytes.
pub const RECORD_BYTES_PER_GROUP: usize = 64 << 20;
/// Steps (or outcomes) buffered before a row group of their table is written.
pub const ROWS_PER_GROUP: usize = 65_536;

/// When a buffered row group is written: what an export holds in memory at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupLimits {
    /// Runs in a group of `runs.parquet`…
    pub runs: usize,
    /// …or bytes of their records.
    pub record_bytes: usize,
    /// Rows in a group of `steps.parquet` or `outcomes.parquet`.
    pub rows: usize,
}

impl Default for GroupLimits {
    fn default() -> GroupLimits {
        GroupLimits {
            runs: RUNS_PER_GROUP,
            record_bytes: RECORD_BYTES_PER_GROUP,
            rows: ROWS_PER_GROUP,
        }
    }
}

/// The metadata key that names a file's table and its schema's version.
const TABLE_KEY: &str = "decode-lab.table";
const SCHEMA_VERSION: u32 = 1;

/// A table's buffered row group.
pub(crate) trait Buffer: Default {
    const TABLE: Table;
    /// The Parquet schema, in the order of [`Buffer::columns`].
    const SCHEMA: &'static str;

    fn columns(&mut self) -> Vec<&mut dyn Column>;

    /// Whether the group is full and should be written: by default, at the limit's rows.
    fn full(&self, limits: &GroupLimits) -> bool {
        self.rows() >= limits.rows
    }

    fn rows(&self) -> usize;

    /// Forgets the rows after their columns are written and cleared.
    fn reset(&mut self);
}

/// One table's file and its buffered row group.
pub(crate) struct TableFile<B> {
    path: String,
    writer: SerializedFileWriter<BufWriter<File>>,
    pub(crate) buffer: B,
    limits: GroupLimits,
    rows: u64,
}

impl<B: Buffer> TableFile<B> {
    pub(crate) fn with_limits(
        dir: &Path,
        limits: GroupLimits,
    ) -> Result<TableFile<B>, RunsParquetError> {
        let path = B::TABLE.file_in(dir);
        let shown = path.display().to_string();
        let parquet = |source| RunsParquetError::Parquet {
            path: shown.clone(),
            source,
        };
        let file = File::create(&path).map_err(|source| RunsParquetError::Create {
            path: shown.clone(),
            source,
        })?;
        let schema = Arc::new(parse_message_type(B::SCHEMA).map_err(parquet)?);
        let properties = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("decode-lab {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(vec![KeyValue::new(
                TABLE_KEY.to_string(),
                format!("{} v{SCHEMA_VERSION}", B::TABLE.name()),
            )]))
            .build();
        let writer = SerializedFileWriter::new(BufWriter::new(file), schema, Arc::new(properties))
            .map_err(parquet)?;
        let mut buffer = B::default();
        let leaves = writer.schema_descr().columns();
        let columns = buffer.columns();
        for position in 0..leaves.len().max(columns.len()) {
            let expected = leaves
                .get(position)
                .map(|c| format!("{} {}", c.path().string(), c.physical_type()));
            let found = columns
                .get(position)
                .map(|c| format!("{} {}", c.path(), c.physical()));
            if expected != found {
                return Err(RunsParquetError::Schema {
                    path: shown,
                    position,
                    expected: expected.unwrap_or_else(|| "absent".into()),
                    found: found.unwrap_or_else(|| "nothing".into()),
                });
            }
        }
        Ok(TableFile {
            path: shown,
            writer,
            buffer,
            limits,
            rows: 0,
        })
    }

    /// Writes the group when it is full.
    fn flush_if_full(&mut self) -> Result<(), RunsParquetError> {
        if self.buffer.full(&self.limits) {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), RunsParquetError> {
        let rows = self.buffer.rows();
        if rows == 0 {
            return Ok(());
        }
        let path = &self.path;
        let parquet = |source| RunsParquetError::Parquet {
            path: path.clone(),
            source,
        };
        let mut group = self.writer.next_row_group().map_err(parquet)?;
        for (position, column) in self.buffer.columns().into_iter().enumerate() {
            let mismatch = |expected: &str| RunsParquetError::Schema {
                path: path.clone(),
                position,
                expected: expected.to_string(),
                found: format!("{} {}", column.path(), column.physical()),
            };
            let Some(mut writer) = group.next_column().map_err(parquet)? else {
                return Err(mismatch("absent"));
            };
            if !column.write(writer.untyped()).map_err(parquet)? {
                return Err(mismatch("of another physical type"));
            }
            writer.close().map_err(parquet)?;
            column.clear();
        }
        group.close().map_err(parquet)?;
        self.buffer.reset();
        self.rows += rows as u64;
        Ok(())
    }

    /// Writes what is buffered and the footer; the number of rows written.
    pub(crate) fn finish(mut self) -> Result<u64, RunsParquetError> {
        self.flush()?;
        let path = self.path;
        self.writer
            .close()
            .map_err(|source| RunsParquetError::Parquet { path, source })?;
        Ok(self.rows)
    }
}

/// An export in progress: `runs.parquet`, `steps.parquet` and `outcomes.parquet` in one
/// directory.
pub struct Export {
    runs: TableFile<Runs>,
    steps: TableFile<Steps>,
    outcomes: TableFile<Outcomes>,
}

/// What an export wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    pub runs: u64,
    pub steps: u64,
    pub outcomes: u64,
}

impl Export {
    /// Starts the three files in `dir` (made if missing), replacing any already there.
    pub fn create(dir: &Path) -> Result<Export, RunsParquetError> {
        Export::with_limits(dir, GroupLimits::default())
    }

    /// [`Export::create`] with row groups written at other sizes.
    pub fn with_limits(dir: &Path, limits: GroupLimits) -> Result<Export, RunsParquetError> {
        std::fs::create_dir_all(dir).map_err(|source| RunsParquetError::Create {
            path: dir.display().to_string(),
            source,
        })?;
        Ok(Export {
            runs: TableFile::with_limits(dir, limits)?,
            steps: TableFile::with_limits(dir, limits)?,
            outcomes: TableFile::with_limits(dir, limits)?,
        })
    }

    /// Adds a run: `line` is the JSON text `record` was read from and checked by
    /// ([`observe::read_run`]), kept word for word; `slice` is the slice `observe` gives it.
    pub fn add_run(
        &mut self,
        line: &str,
        record: &RunRecord,
        slice: &str,
    ) -> Result<(), RunsParquetError> {
        let run_id = record
            .run_id
            .clone()
            .unwrap_or_else(|| record.computed_run_id());
        let version_id = record
            .version_id
            .clone()
            .unwrap_or_else(|| record.computed_version_id());
        self.steps.buffer.add(&run_id, &version_id, record);
        self.steps.flush_if_full()?;
        self.runs
            .buffer
            .add(&run_id, &version_id, line, record, slice);
        self.runs.flush_if_full()
    }

    pub fn add_outcome(&mut self, outcome: &Outcome) -> Result<(), RunsParquetError> {
        self.outcomes.buffer.add(outcome);
        self.outcomes.flush_if_full()
    }

    /// Writes what is buffered and each file's footer.
    pub fn finish(self) -> Result<Written, RunsParquetError> {
        Ok(Written {
            runs: self.runs.finish()?,
            steps: self.steps.finish()?,
            outcomes: self.outcomes.finish()?,
        })
    }
}

/// The row group of `runs.parquet`.
struct Runs {
    run_id: Leaf<ByteArray>,
    version_id: Leaf<ByteArray>,
    app_version: Leaf<ByteArray>,
    policy_version: Leaf<ByteArray>,
    model_name: Leaf<ByteArray>,
    model_hash: Leaf<ByteArray>,
    tokenizer_name: Leaf<ByteArray>,
    tokenizer_hash: Leaf<ByteArray>,
    prompt_template_hash: Leaf<ByteArray>,
    precision: Leaf<ByteArray>,
    backend: Leaf<ByteArray>,
    temperature: Leaf<f64>,
    top_k: Leaf<i64>,
    top_p: Leaf<f64>,
    min_p: Leaf<f64>,
    repetition_penalty: Leaf<f64>,
    frequency_penalty: Leaf<f64>,
    presence_penalty: Leaf<f64>,
    no_repeat_ngram: Leaf<i64>,
    min_new_tokens: Leaf<i64>,
    eos_token: Leaf<i64>,
    stage_order: Leaf<ByteArray>,
    max_tokens: Leaf<i64>,
    version_key: Leaf<ByteArray>,
    slice: Leaf<ByteArray>,
    tag_keys: Leaf<ByteArray>,
    tag_values: Leaf<ByteArray>,
    seed: Leaf<i64>,
    prompt_bytes: Leaf<i64>,
    prompt_tokens: Leaf<i64>,
    output_tokens: Leaf<i64>,
    ttft_ms: Leaf<f64>,
    decode_ms: Leaf<f64>,
    tpot_ms: Leaf<f64>,
    stop_reason: Leaf<ByteArray>,
    stop_string: Leaf<ByteArray>,
    degraded_reason: Leaf<ByteArray>,
    at_s: Leaf<f64>,
    record: Leaf<ByteArray>,
    rows: usize,
    record_bytes: usize,
}

impl Default for Runs {
    fn default() -> Runs {
        Runs {
            run_id: Leaf::required("run_id"),
            version_id: Leaf::required("version_id"),
            app_version: Leaf::required("app_version"),
            policy_version: Leaf::required("policy_version"),
            model_name: Leaf::required("model_name"),
            model_hash: Leaf::required("model_hash"),
            tokenizer_name: Leaf::required("tokenizer_name"),
            tokenizer_hash: Leaf::required("tokenizer_hash"),
            prompt_template_hash: Leaf::required("prompt_template_hash"),
            precision: Leaf::optional("precision"),
            backend: Leaf::required("backend"),
            temperature: Leaf::required("temperature"),
            top_k: Leaf::required("top_k"),
            top_p: Leaf::required("top_p"),
            min_p: Leaf::required("min_p"),
            repetition_penalty: Leaf::required("repetition_penalty"),
            frequency_penalty: Leaf::required("frequency_penalty"),
            presence_penalty: Leaf::required("presence_penalty"),
            no_repeat_ngram: Leaf::required("no_repeat_ngram"),
            min_new_tokens: Leaf::required("min_new_tokens"),
            eos_token: Leaf::optional("eos_token"),
            stage_order: Leaf::required("stage_order"),
            max_tokens: Leaf::required("max_tokens"),
            version_key: Leaf::required("version_key"),
            slice: Leaf::required("slice"),
            tag_keys: Leaf::map_entries("tags.key_value.key"),
            tag_values: Leaf::map_entries("tags.key_value.value"),
            seed: Leaf::required("seed"),
            prompt_bytes: Leaf::required("prompt_bytes"),
            prompt_tokens: Leaf::required("prompt_tokens"),
            output_tokens: Leaf::required("output_tokens"),
            ttft_ms: Leaf::required("ttft_ms"),
            decode_ms: Leaf::required("decode_ms"),
            tpot_ms: Leaf::optional("tpot_ms"),
            stop_reason: Leaf::required("stop_reason"),
            stop_string: Leaf::optional("stop_string"),
            degraded_reason: Leaf::optional("degraded_reason"),
            at_s: Leaf::optional("at_s"),
            record: Leaf::required("record"),
            rows: 0,
            record_bytes: 0,
        }
    }
}

impl Runs {
    fn add(&mut self, run_id: &str, version_id: &str, line: &str, r: &RunRecord, slice: &str) {
        let key = VersionKey::of(r);
        let policy = &key.policy;
        self.run_id.push(text(run_id));
        self.version_id.push(text(version_id));
        self.app_version.push(text(&key.app_version));
        self.policy_version.push(text(&key.policy_version));
        self.model_name.push(text(&r.model.name));
        self.model_hash.push(text(&key.model_hash));
        self.tokenizer_name.push(text(&r.tokenizer.name));
        self.tokenizer_hash.push(text(&key.tokenizer_hash));
        self.prompt_template_hash
            .push(text(&key.prompt_template_hash));
        self.precision
            .push_optional(key.precision.map(|p| text(p.name())));
        self.backend.push(text(key.backend.name()));
        self.temperature.push(policy.temperature);
        self.top_k.push(unsigned(policy.top_k as u64));
        self.top_p.push(policy.top_p);
        self.min_p.push(policy.min_p);
        self.repetition_penalty.push(policy.repetition_penalty);
        self.frequency_penalty.push(policy.frequency_penalty);
        self.presence_penalty.push(policy.presence_penalty);
        self.no_repeat_ngram
            .push(unsigned(policy.no_repeat_ngram as u64));
        self.min_new_tokens
            .push(unsigned(policy.min_new_tokens as u64));
        self.eos_token
            .push_optional(policy.eos_token.map(i64::from));
        self.stage_order.push(text(&policy.order_label()));
        self.max_tokens.push(unsigned(key.max_tokens as u64));
        // A key is plain strings, numbers and lists: it always has a JSON form.
        self.version_key
            .push(text(&serde_json::to_string(&key).unwrap_or_default()));
        self.slice.push(text(slice));
        self.tag_keys.push_entries(r.tags.keys().map(|k| text(k)));
        self.tag_values
            .push_entries(r.tags.values().map(|v| text(v)));
        self.seed.push(unsigned(r.config.seed));
        self.prompt_bytes.push(length(r.rendered_prompt.len()));
        self.prompt_tokens.push(length(r.prompt_tokens.len()));
        self.output_tokens.push(length(r.steps.len()));
        self.ttft_ms.push(observe::group::ttft_ms(r));
        self.decode_ms.push(observe::group::decode_us(r) / 1e3);
        self.tpot_ms.push_optional(observe::group::tpot_ms(r));
        self.stop_reason.push(text(r.stop_reason.name()));
        self.stop_string
            .push_optional(r.stop_string.as_deref().map(text));
        self.degraded_reason
            .push_optional(r.degraded_reason.as_deref().map(text));
        self.at_s.push_optional(observe::at_s_of(r));
        self.record.push(text(line));
        self.rows += 1;
        self.record_bytes += line.len();
    }
}

impl Buffer for Runs {
    const TABLE: Table = Table::Runs;
    const SCHEMA: &'static str = "message runs {
        required binary run_id (STRING);
        required binary version_id (STRING);
        required binary app_version (STRING);
        required binary policy_version (STRING);
        required binary model_name (STRING);
        required binary model_hash (STRING);
        required binary tokenizer_name (STRING);
        required binary tokenizer_hash (STRING);
        required binary prompt_template_hash (STRING);
        optional binary precision (STRING);
        required binary backend (STRING);
        required double temperature;
        required int64 top_k (INTEGER(64, false));
        required double top_p;
        required double min_p;
        required double repetition_penalty;
        required double frequency_penalty;
        required double presence_penalty;
        required int64 no_repeat_ngram (INTEGER(64, false));
        required int64 min_new_tokens (INTEGER(64, false));
        optional int64 eos_token;
        required binary stage_order (STRING);
        required int64 max_tokens (INTEGER(64, false));
        required binary version_key (STRING);
        required binary slice (STRING);
        required group tags (MAP) {
            repeated group key_value {
                required binary key (STRING);
                required binary value (STRING);
            }
        }
        required int64 seed (INTEGER(64, false));
        required int64 prompt_bytes;
        required int64 prompt_tokens;
        required int64 output_tokens;
        required double ttft_ms;
        required double decode_ms;
        optional double tpot_ms;
        required binary stop_reason (STRING);
        optional binary stop_string (STRING);
        optional binary degraded_reason (STRING);
        optional double at_s;
        required binary record (STRING);
    }";

    fn columns(&mut self) -> Vec<&mut dyn Column> {
        vec![
            &mut self.run_id,
            &mut self.version_id,
            &mut self.app_version,
            &mut self.policy_version,
            &mut self.model_name,
            &mut self.model_hash,
            &mut self.tokenizer_name,
            &mut self.tokenizer_hash,
            &mut self.prompt_template_hash,
            &mut self.precision,
            &mut self.backend,
            &mut self.temperature,
            &mut self.top_k,
            &mut self.top_p,
            &mut self.min_p,
            &mut self.repetition_penalty,
            &mut self.frequency_penalty,
            &mut self.presence_penalty,
            &mut self.no_repeat_ngram,
            &mut self.min_new_tokens,
            &mut self.eos_token,
            &mut self.stage_order,
            &mut self.max_tokens,
            &mut self.version_key,
            &mut self.slice,
            &mut self.tag_keys,
            &mut self.tag_values,
            &mut self.seed,
            &mut self.prompt_bytes,
            &mut self.prompt_tokens,
            &mut self.output_tokens,
            &mut self.ttft_ms,
            &mut self.decode_ms,
            &mut self.tpot_ms,
            &mut self.stop_reason,
            &mut self.stop_string,
            &mut self.degraded_reason,
            &mut self.at_s,
            &mut self.record,
        ]
    }

    fn full(&self, limits: &GroupLimits) -> bool {
        self.rows >= limits.runs || self.record_bytes >= limits.record_bytes
    }

    fn rows(&self) -> usize {
        self.rows
    }

    fn reset(&mut self) {
        self.rows = 0;
        self.record_bytes = 0;
    }
}

/// The row group of `steps.parquet`.
struct Steps {
    run_id: Leaf<ByteArray>,
    version_id: Leaf<ByteArray>,
    step: Leaf<i64>,
    token: Leaf<i64>,
    text: Leaf<ByteArray>,
    prob: Leaf<f64>,
    logprob: Leaf<f64>,
    entropy: Leaf<f64>,
    survivors: Leaf<i64>,
    draw: Leaf<f64>,
    model_prob: Leaf<f64>,
    model_logprob: Leaf<f64>,
    model_us: Leaf<f64>,
    policy_us: Leaf<f64>,
    rows: usize,
}

impl Default for Steps {
    fn default() -> Steps {
        Steps {
            run_id: Leaf::required("run_id"),
            version_id: Leaf::required("version_id"),
            step: Leaf::required("step"),
            token: Leaf::required("token"),
            text: Leaf::required("text"),
            prob: Leaf::required("prob"),
            logprob: Leaf::required("logprob"),
            entropy: Leaf::required("entropy"),
            survivors: Leaf::required("survivors"),
            draw: Leaf::optional("draw"),
            model_prob: Leaf::optional("model_prob"),
            model_logprob: Leaf::optional("model_logprob"),
            model_us: Leaf::required("model_us"),
            policy_us: Leaf::required("policy_us"),
            rows: 0,
        }
    }
}

impl Steps {
    fn add(&mut self, run_id: &str, version_id: &str, r: &RunRecord) {
        for s in &r.steps {
            self.run_id.push(text(run_id));
            self.version_id.push(text(version_id));
            self.step.push(length(s.step));
            self.token.push(i64::from(s.token));
            self.text.push(text(&s.text));
            self.prob.push(s.prob);
            self.logprob.push(s.logprob);
            self.entropy.push(s.entropy);
            self.survivors.push(length(s.survivors));
            self.draw.push_optional(s.draw);
            self.model_prob.push_optional(s.model_prob);
            self.model_logprob.push_optional(s.model_logprob);
            self.model_us.push(s.model_us);
            self.policy_us.push(s.policy_us);
        }
        self.rows += r.steps.len();
    }
}

impl Buffer for Steps {
    const TABLE: Table = Table::Steps;
    const SCHEMA: &'static str = "message steps {
        required binary run_id (STRING);
        required binary version_id (STRING);
        required int64 step;
        required int64 token;
        required binary text (STRING);
        required double prob;
        required double logprob;
        required double entropy;
        required int64 survivors;
        optional double draw;
        optional double model_prob;
        optional double model_logprob;
        required double model_us;
        required double policy_us;
    }";

    fn columns(&mut self) -> Vec<&mut dyn Column> {
        vec![
            &mut self.run_id,
            &mut self.version_id,
            &mut self.step,
            &mut self.token,
            &mut self.text,
            &mut self.prob,
            &mut self.logprob,
            &mut self.entropy,
            &mut self.survivors,
            &mut self.draw,
            &mut self.model_prob,
            &mut self.model_logprob,
            &mut self.model_us,
            &mut self.policy_us,
        ]
    }

    fn rows(&self) -> usize {
        self.rows
    }

    fn reset(&mut self) {
        self.rows = 0;
    }
}

/// The row group of `outcomes.parquet`.
pub(crate) struct Outcomes {
    run_id: Leaf<ByteArray>,
    outcome: Leaf<ByteArray>,
    at_s: Leaf<f64>,
    rows: usize,
}

impl Default for Outcomes {
    fn default() -> Outcomes {
        Outcomes {
            run_id: Leaf::required("run_id"),
            outcome: Leaf::required("outcome"),
            at_s: Leaf::required("at_s"),
            rows: 0,
        }
    }
}

impl Outcomes {
    fn add(&mut self, o: &Outcome) {
        self.push(&o.run_id, o.outcome.name(), o.at_s);
    }

    /// A row as its columns hold it: the verdict by name.
    pub(crate) fn push(&mut self, run_id: &str, outcome: &str, at_s: f64) {
        self.run_id.push(text(run_id));
        self.outcome.push(text(outcome));
        self.at_s.push(at_s);
        self.rows += 1;
    }
}

impl Buffer for Outcomes {
    const TABLE: Table = Table::Outcomes;
    const SCHEMA: &'static str = "message outcomes {
        required binary run_id (STRING);
        required binary outcome (STRING);
        required double at_s;
    }";

    fn columns(&mut self) -> Vec<&mut dyn Column> {
        vec![&mut self.run_id, &mut self.outcome, &mut self.at_s]
    }

    fn rows(&self) -> usize {
        self.rows
    }

    fn reset(&mut self) {
        self.rows = 0;
    }
}
