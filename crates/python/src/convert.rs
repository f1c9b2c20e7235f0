//! Values across the boundary: JSON values to Python objects, a configuration given as a dict, TOML text
//! or a path, documents given as strings or dicts.

use std::path::PathBuf;

use kgrag::config::Config;
use kgrag::documents::{NewDocument, SourceDoc};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::{Failure, Outcome};

/// A JSON value as the Python object `json.loads` would give.
pub(crate) fn json_to_py<'py>(
    py: Python<'py>,
    value: &serde_json::Value,
) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value as V;
    Ok(match value {
        V::Null => py.None().into_bound(py),
        V::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        V::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        V::String(s) => PyString::new(py, s).into_any(),
        V::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            list.into_any()
        }
        V::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, json_to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// A Python value of a configuration dict as TOML; `at` names it in errors (`retriever.top_k`).
fn py_to_toml(value: &Bound<'_, PyAny>, at: &str) -> Outcome<toml::Value> {
    if value.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(value.is_truthy().unwrap_or(false)));
    }
    if value.is_instance_of::<PyInt>() {
        return value
            .extract::<i64>()
            .map(toml::Value::Integer)
            .map_err(|_| {
                Failure::Config(format!("{at}: the integer {value} does not fit in 64 bits"))
            });
    }
    if value.is_instance_of::<PyFloat>() {
        return value
            .extract::<f64>()
            .map(toml::Value::Float)
            .map_err(|e| Failure::Config(format!("{at}: {e}")));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return text_of(s, at).map(toml::Value::String);
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        return dict_to_toml(dict, at).map(toml::Value::Table);
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for (i, item) in value
            .try_iter()
            .map_err(|e| Failure::Config(format!("{at}: {e}")))?
            .enumerate()
        {
            let item = item.map_err(|e| Failure::Config(format!("{at}[{i}]: {e}")))?;
            items.push(py_to_toml(&item, &format!("{at}[{i}]"))?);
        }
        return Ok(toml::Value::Array(items));
    }
    if value.is_none() {
        return Err(Failure::Config(format!(
            "{at} is None: leave the key out to keep its default"
        )));
    }
    if let Ok(path) = value.extract::<PathBuf>() {
        return Ok(toml::Value::String(path.display().to_string()));
    }
    Err(Failure::Config(format!(
        "{at}: a value of type {} cannot be a configuration value (use str, int, float, bool, list or \
         dict)",
        type_name(value)
    )))
}

fn dict_to_toml(dict: &Bound<'_, PyDict>, at: &str) -> Outcome<toml::Table> {
    let mut table = toml::Table::new();
    for (k, v) in dict.iter() {
        let key: String = k.extract().map_err(|_| {
            Failure::Config(format!(
                "{}: the keys of a configuration dict are strings, not {k}",
                if at.is_empty() { "config" } else { at }
            ))
        })?;
        let path = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        table.insert(key, py_to_toml(&v, &path)?);
    }
    Ok(table)
}

/// TOML text has a key-value pair or a table header; a path has neither.
pub(crate) fn looks_like_toml(text: &str) -> bool {
    text.contains('=') || text.contains('\n') || text.trim_start().starts_with('[')
}

/// A configuration given as a dict (`{"retriever": {"top_k": 5}}`), TOML text, or the path of a TOML
/// file (`str` or `os.PathLike`), as a TOML table; `None` for `None`.
pub(crate) fn config_table_from_py(
    config: Option<&Bound<'_, PyAny>>,
) -> Outcome<Option<toml::Table>> {
    let Some(config) = config.filter(|c| !c.is_none()) else {
        return Ok(None);
    };
    if let Ok(dict) = config.cast::<PyDict>() {
        return dict_to_toml(dict, "").map(Some);
    }
    let (text, file) = if let Ok(s) = config.cast::<PyString>() {
        let text = text_of(s, "config")?;
        if looks_like_toml(&text) {
            (text, None)
        } else {
            let path = PathBuf::from(text);
            (read_config_file(&path)?, Some(path))
        }
    } else if let Ok(path) = config.extract::<PathBuf>() {
        (read_config_file(&path)?, Some(path))
    } else {
        return Err(Failure::Config(format!(
            "config: expected a dict, TOML text or a path, not {}",
            type_name(config)
        )));
    };
    toml::from_str::<toml::Table>(&text).map(Some).map_err(|e| {
        Failure::Config(match file {
            Some(path) => format!("{}: {e}", path.display()),
            None => e.to_string(),
        })
    })
}

fn read_config_file(path: &std::path::Path) -> Outcome<String> {
    std::fs::read_to_string(path).map_err(|source| {
        Failure::Kgrag(kgrag::KgragError::Io {
            path: path.to_path_buf(),
            source,
        })
    })
}

/// `table` as TOML text and the configuration it is, checked as `kgrag.toml` is (unknown keys are errors
/// naming the key).
pub(crate) fn checked_toml(table: &toml::Table) -> Outcome<(String, Config)> {
    let text = toml::to_string(table).map_err(|e| Failure::Config(e.to_string()))?;
    let config = Config::parse(&text)?;
    Ok((text, config))
}

/// The configuration of `table`, checked as `kgrag.toml` is.
pub(crate) fn config_of(table: &toml::Table) -> Outcome<Config> {
    checked_toml(table).map(|(_, config)| config)
}

/// The keys that choose a section's kind (`[chat] provider`, `[index.chunking] strategy`): a table that
/// names another kind replaces the stored one instead of being merged into it (the other kind's keys
/// would be unknown to it).
const KIND_KEYS: [&str; 3] = ["provider", "strategy", "mode"];

/// `over` laid over `base`: its keys replace `base`'s, its tables are merged key by key unless they
/// choose another kind (see [`KIND_KEYS`]).
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o))
                if !KIND_KEYS
                    .iter()
                    .any(|k| o.get(*k).is_some_and(|v| b.get(*k) != Some(v))) =>
            {
                merge(b, o)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// `stored` (an index's configuration) with the keys of `over` laid over it, checked.
pub(crate) fn config_over(stored: &Config, over: toml::Table) -> Outcome<Config> {
    let mut base = match toml::Value::try_from(stored) {
        Ok(toml::Value::Table(t)) => t,
        Ok(_) => toml::Table::new(),
        Err(e) => {
            return Err(Failure::Config(format!(
                "the index's configuration cannot be written as TOML: {e}"
            )))
        }
    };
    // HiRAG's and LeanRAG's copies of `[cluster]` are filled from it when the result is parsed: left in,
    // a changed `[cluster]` would read as a copy that differs.
    for section in ["hirag", "leanrag"] {
        if let Some(toml::Value::Table(t)) = base.get_mut(section) {
            t.remove("cluster");
        }
    }
    merge(&mut base, over);
    config_of(&base)
}

/// The text of a Python `str` (an error naming `what` for one that is not valid Unicode, such as a lone
/// surrogate).
pub(crate) fn text_of(s: &Bound<'_, PyString>, what: &str) -> Outcome<String> {
    s.to_cow()
        .map(|c| c.into_owned())
        .map_err(|e| Failure::Value(format!("{what}: {e}")))
}

/// The documents of `Index.add`: a list (or any iterable) of strings or dicts with `text` and optionally
/// `id` and `title`. A document without an id is named by its content hash (`doc-<md5>`, HippoRAG's
/// passage id), so the same text given twice is one document. An entry of another type, or a dict without
/// `text`, is an error naming its position.
pub(crate) fn documents_from_py(documents: &Bound<'_, PyAny>) -> PyResult<Vec<NewDocument>> {
    if documents.is_instance_of::<PyString>() || documents.is_instance_of::<PyDict>() {
        return Err(Failure::Type(
            "documents: expected a list of documents (strings or dicts); wrap a single one in a list"
                .into(),
        )
        .into());
    }
    let iter = documents.try_iter().map_err(|_| {
        PyErr::from(Failure::Type(format!(
            "documents: expected a list of strings or dicts, not {}",
            type_name(documents)
        )))
    })?;
    let mut out = Vec::new();
    for (i, item) in iter.enumerate() {
        let item = item?;
        if let Ok(text) = item.cast::<PyString>() {
            let text = text_of(text, &format!("documents[{i}]"))?;
            out.push(NewDocument {
                id: content_id(&text),
                title: None,
                text,
            });
            continue;
        }
        let Ok(dict) = item.cast::<PyDict>() else {
            return Err(Failure::Type(format!(
                "documents[{i}]: expected a str or a dict with \"text\", not {}",
                type_name(&item)
            ))
            .into());
        };
        let field = |name: &str| -> PyResult<Option<String>> {
            match dict.get_item(name)? {
                None => Ok(None),
                Some(v) if v.is_none() => Ok(None),
                Some(v) => match v.cast::<PyString>() {
                    Ok(s) => Ok(Some(text_of(s, &format!("documents[{i}][{name:?}]"))?)),
                    Err(_) => Err(Failure::Type(format!(
                        "documents[{i}][{name:?}]: expected a str, not {}",
                        type_name(&v)
                    ))
                    .into()),
                },
            }
        };
        for key in dict.keys() {
            let key: String = key.extract().unwrap_or_default();
            if !["id", "title", "text"].contains(&key.as_str()) {
                return Err(Failure::Value(format!(
                    "documents[{i}]: unknown key {key:?} (a document has \"id\", \"title\" and \"text\")"
                ))
                .into());
            }
        }
        let Some(text) = field("text")? else {
            return Err(Failure::Value(format!("documents[{i}]: \"text\" is missing")).into());
        };
        out.push(NewDocument {
            id: field("id")?.unwrap_or_else(|| content_id(&text)),
            title: field("title")?,
            text,
        });
    }
    if out.is_empty() {
        return Err(Failure::Value("documents: the list is empty".into()).into());
    }
    Ok(out)
}

/// The id of a document given without one: its content hash.
fn content_id(text: &str) -> String {
    kgrag::types::DocId::from_text(text).as_str().to_owned()
}

/// Document ids given as a list of strings (a single string is one id); an empty list is an error.
pub(crate) fn ids_from_py(ids: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(s) = ids.cast::<PyString>() {
        return Ok(vec![text_of(s, "ids")?]);
    }
    let iter = ids.try_iter().map_err(|_| {
        PyErr::from(Failure::Type(format!(
            "ids: expected a list of document ids, not {}",
            type_name(ids)
        )))
    })?;
    let mut out = Vec::new();
    for (i, item) in iter.enumerate() {
        let item = item?;
        match item.cast::<PyString>() {
            Ok(s) => out.push(text_of(s, &format!("ids[{i}]"))?),
            Err(_) => {
                return Err(Failure::Type(format!(
                    "ids[{i}]: expected a str, not {}",
                    type_name(&item)
                ))
                .into())
            }
        }
    }
    if out.is_empty() {
        return Err(Failure::Value("ids: the list is empty".into()).into());
    }
    Ok(out)
}

/// The source documents of `docs`, checked (ids not blank and unique, texts not blank).
pub(crate) fn source_docs(docs: Vec<NewDocument>) -> Outcome<Vec<SourceDoc>> {
    Ok(kgrag::documents::from_new(docs, "python")?)
}

/// The name of `value`'s type, for messages.
pub(crate) fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}
