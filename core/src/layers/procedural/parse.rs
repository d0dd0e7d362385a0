//! Parsing steps from JSON and the checks of `learn` / `update` / `execute`.

use std::collections::HashMap;

use serde_json::Value;

use super::builtins::is_builtin;
use super::expr::{MAX_EXPRESSION_BYTES, Seg, on_cel_stack, one_line, parse_template};
use super::model::{Actions, Branch, Next, Step, empty_object};
use crate::engine::Engine;
use crate::{Error, Result, util::input};

pub(super) fn check_actions(e: &Engine, actions: &Actions) -> Result<()> {
    for name in actions.keys() {
        input::key(&e.opts.limits, "actions", name)?;
        if is_builtin(name) {
            return Err(Error::invalid(
                "actions",
                format!("{name:?} is a built-in action and cannot be replaced by a host action"),
            ));
        }
    }
    Ok(())
}

/// Parse steps from JSON (what bindings and MCP receive): an array of
/// `{id, description?, action, parameters?, next?}`. Errors name the field,
/// e.g. `steps[2].next[0].condition`. Graph checks happen in `learn`/`update`.
pub fn steps_from_json(value: Value) -> Result<Vec<Step>> {
    let Value::Array(items) = value else {
        return Err(Error::invalid(
            "steps",
            format!("must be a JSON array of steps, got {}", json_type(&value)),
        ));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| step_from_json(i, item))
        .collect()
}

fn step_from_json(i: usize, item: Value) -> Result<Step> {
    let field = |name: &str| format!("steps[{i}].{name}");
    let Value::Object(mut m) = item else {
        return Err(Error::invalid(
            format!("steps[{i}]"),
            format!("must be a JSON object, got {}", json_type(&item)),
        ));
    };
    if let Some(k) = m.keys().find(|k| {
        !matches!(
            k.as_str(),
            "id" | "description" | "action" | "parameters" | "next"
        )
    }) {
        return Err(Error::invalid(
            field(k),
            "unknown field (a step has id, description, action, parameters, next)",
        ));
    }
    let id = required_string(m.remove("id"), &field("id"))?;
    let description = match m.remove("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(Error::invalid(
                field("description"),
                format!("must be a string, got {}", json_type(&other)),
            ));
        }
    };
    let action = required_string(m.remove("action"), &field("action"))?;
    let parameters = match m.remove("parameters") {
        None | Some(Value::Null) => empty_object(),
        Some(p) => p,
    };
    let next = match m.remove("next") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(Next::Step(s)),
        Some(Value::Array(branches)) => {
            let mut out = Vec::with_capacity(branches.len());
            for (j, b) in branches.into_iter().enumerate() {
                let bfield = |name: &str| format!("steps[{i}].next[{j}].{name}");
                let Value::Object(mut bm) = b else {
                    return Err(Error::invalid(
                        format!("steps[{i}].next[{j}]"),
                        format!(
                            "a branch must be an object {{condition, next}}, got {}",
                            json_type(&b)
                        ),
                    ));
                };
                if let Some(k) = bm
                    .keys()
                    .find(|k| !matches!(k.as_str(), "condition" | "next"))
                {
                    return Err(Error::invalid(
                        bfield(k),
                        "unknown field (a branch has condition, next)",
                    ));
                }
                let condition = required_string(bm.remove("condition"), &bfield("condition"))?;
                let next = required_string(bm.remove("next"), &bfield("next"))?;
                out.push(Branch { condition, next });
            }
            Some(Next::Branches(out))
        }
        Some(other) => {
            return Err(Error::invalid(
                field("next"),
                format!(
                    "must be a step id, a list of {{condition, next}} branches, or absent; got {}",
                    json_type(&other)
                ),
            ));
        }
    };
    Ok(Step {
        id,
        description,
        action,
        parameters,
        next,
    })
}

fn required_string(v: Option<Value>, field: &str) -> Result<String> {
    match v {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(Error::invalid(field, "is required")),
        Some(other) => Err(Error::invalid(
            field,
            format!("must be a string, got {}", json_type(&other)),
        )),
    }
}

pub(super) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An expression to compile during validation: field, owning step id, what it is, source.
struct ExprCheck<'a> {
    field: String,
    step: &'a str,
    what: &'static str,
    src: &'a str,
}

fn check_expr_size(field: &str, src: &str) -> Result<()> {
    if src.len() > MAX_EXPRESSION_BYTES {
        return Err(Error::limit(
            field,
            "expression size in bytes",
            MAX_EXPRESSION_BYTES as u64,
            src.len() as u64,
        ));
    }
    Ok(())
}

/// The graph checks of `learn` / `update`.
pub(super) fn validate_steps(e: &Engine, steps: &[Step]) -> Result<()> {
    let lim = &e.opts.limits;
    if steps.is_empty() {
        return Err(Error::invalid(
            "steps",
            "a procedure needs at least one step",
        ));
    }
    if steps.len() > lim.max_procedure_steps {
        return Err(Error::limit(
            "steps",
            "steps in one procedure (Limits::max_procedure_steps)",
            lim.max_procedure_steps as u64,
            steps.len() as u64,
        ));
    }
    let mut ids: HashMap<&str, usize> = HashMap::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        input::key(lim, &format!("steps[{i}].id"), &s.id)?;
        if let Some(j) = ids.insert(s.id.as_str(), i) {
            return Err(Error::invalid(
                format!("steps[{i}].id"),
                format!("duplicate step id {:?} (already used by steps[{j}])", s.id),
            ));
        }
        input::key(lim, &format!("steps[{i}].action"), &s.action)?;
        if s.description.len() > lim.max_value_bytes {
            return Err(Error::limit(
                format!("steps[{i}].description"),
                "size in bytes",
                lim.max_value_bytes as u64,
                s.description.len() as u64,
            ));
        }
        input::value(lim, &format!("steps[{i}].parameters"), &s.parameters)?;
    }
    let mut exprs: Vec<ExprCheck<'_>> = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        match &s.next {
            None => {}
            Some(Next::Step(target)) if !ids.contains_key(target.as_str()) => {
                return Err(Error::invalid(
                    format!("steps[{i}].next"),
                    format!("step {:?} goes to unknown step {target:?}", s.id),
                ));
            }
            Some(Next::Step(_)) => {}
            Some(Next::Branches(branches)) => {
                for (j, b) in branches.iter().enumerate() {
                    let cfield = format!("steps[{i}].next[{j}].condition");
                    if b.condition.trim().is_empty() {
                        return Err(Error::invalid(
                            cfield,
                            format!("step {:?}: condition must not be empty", s.id),
                        ));
                    }
                    check_expr_size(&cfield, &b.condition)?;
                    if !ids.contains_key(b.next.as_str()) {
                        return Err(Error::invalid(
                            format!("steps[{i}].next[{j}].next"),
                            format!("step {:?} branches to unknown step {:?}", s.id, b.next),
                        ));
                    }
                    exprs.push(ExprCheck {
                        field: cfield,
                        step: &s.id,
                        what: "condition",
                        src: &b.condition,
                    });
                }
            }
        }
        // Templates in parameters, walked iteratively with their paths.
        let mut stack: Vec<(String, &Value)> =
            vec![(format!("steps[{i}].parameters"), &s.parameters)];
        while let Some((path, v)) = stack.pop() {
            match v {
                Value::String(text) => {
                    let segs = parse_template(text).map_err(|reason| {
                        Error::invalid(path.clone(), format!("step {:?}: {reason}", s.id))
                    })?;
                    for seg in segs {
                        if let Seg::Expr(src) = seg {
                            check_expr_size(&path, src)?;
                            exprs.push(ExprCheck {
                                field: path.clone(),
                                step: &s.id,
                                what: "template",
                                src,
                            });
                        }
                    }
                }
                Value::Array(a) => {
                    for (j, x) in a.iter().enumerate().rev() {
                        stack.push((format!("{path}[{j}]"), x));
                    }
                }
                Value::Object(o) => {
                    for (k, x) in o.iter().rev() {
                        stack.push((format!("{path}.{k}"), x));
                    }
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
    }
    if exprs.is_empty() {
        return Ok(());
    }
    let bad = on_cel_stack(|| {
        for x in &exprs {
            if let Err(err) = cel::Program::compile(x.src) {
                return Some((
                    x.field.clone(),
                    format!(
                        "step {:?}: {} `{}` does not compile: {}",
                        x.step,
                        x.what,
                        x.src,
                        one_line(&err.to_string())
                    ),
                ));
            }
        }
        None
    })
    .map_err(Error::Procedure)?;
    match bad {
        Some((field, reason)) => Err(Error::invalid(field, reason)),
        None => Ok(()),
    }
}
