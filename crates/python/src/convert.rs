//! Values across the boundary: JSON values to Python objects, a configuration given as a dict, TOML text
//! or a path, documents given as strings or dicts.

use std::path::PathBuf;

use kgrag::config::Config;
use kgrag::documents::{NewDocument, SourceDoc};
use pyo3::exceptions::PyTypeError;
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
        return Ok(toml::Value::String(s.to_string()));
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
    let type_name = value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned());
    Err(Failure::Config(format!(
        "{at}: a value of type {type_name} cannot be a configuration value (use str, int, float, bool, \
         list or dict)"
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

/// A configuration given as a dict (`{"retriever": {"top_k": 5}}`), TOML text, or the path of a TOML
/// file (`str` or `os.PathLike`); `None` for `None`. Unknown keys are errors naming the key.
pub(crate) fn config_from_py(config: Option<&Bound<'_, PyAny>>) -> Outcome<Option<Config>> {
    let Some(config) = config.filter(|c| !c.is_none()) else {
        return Ok(None);
    };
    if let Ok(dict) = config.cast::<PyDict>() {
        let table = dict_to_toml(dict, "")?;
        let text = toml::to_string(&table).map_err(|e| Failure::Config(e.to_string()))?;
        return Ok(Some(Config::parse(&text)?));
    }
    if let Ok(s) = config.cast::<PyString>() {
        let text = s.to_string();
        // TOML text has a key-value pair or a table header; a path has neither.
        if text.contains('=') || text.contains('\n') || text.trim_start().starts_with('[') {
            return Ok(Some(Config::parse(&text)?));
        }
        return Ok(Some(Config::load(std::path::Path::new(&text))?));
    }
    match config.extract::<PathBuf>() {
        Ok(path) => Ok(Some(Config::load(&path)?)),
        Err(_) => Err(Failure::Type(format!(
            "config: expected a dict, TOML text or a path, not {}",
            config
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "?".to_owned())
        ))),
    }
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
            let text = text.to_string();
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
                Some(v) => v.extract::<String>().map(Some).map_err(|_| {
                    Failure::Type(format!(
                        "documents[{i}][{name:?}]: expected a str, not {}",
                        type_name(&v)
                    ))
                    .into()
                }),
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

/// Document ids given as a list of strings (a single string is one id).
pub(crate) fn ids_from_py(ids: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(s) = ids.cast::<PyString>() {
        return Ok(vec![s.to_string()]);
    }
    let iter = ids.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "ids: expected a list of document ids, not {}",
            type_name(ids)
        ))
    })?;
    let mut out = Vec::new();
    for (i, item) in iter.enumerate() {
        let item = item?;
        out.push(item.extract::<String>().map_err(|_| {
            PyErr::from(Failure::Type(format!(
                "ids[{i}]: expected a str, not {}",
                type_name(&item)
            )))
        })?);
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
