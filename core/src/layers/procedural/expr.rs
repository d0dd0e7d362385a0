//! CEL: branch conditions and `{{ expr }}` parameter templates.
//!
//! Expressions are compiled and evaluated on a helper thread with a large
//! stack (see [`on_cel_stack`]), never on the caller's.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::model::Branch;

/// Longest CEL expression (a branch condition or one `{{ }}` template), in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 1024;

/// Stack of the thread CEL parsing and evaluation run on. The `cel` parser
/// (ANTLR) recurses deeply — an unoptimised build overflows a 2 MiB stack on
/// ~16 nested parentheses — so expressions never run on the caller's stack.
/// This is address space reserved, not memory committed.
const CEL_STACK_BYTES: usize = 64 * 1024 * 1024;

pub(super) fn one_line(s: &str) -> String {
    s.split('\n')
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A piece of a template string.
#[derive(Debug, PartialEq)]
pub(super) enum Seg<'a> {
    Text(&'a str),
    Expr(&'a str),
}

/// Split `s` into text and `{{ expr }}` pieces.
pub(super) fn parse_template(s: &str) -> std::result::Result<Vec<Seg<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            out.push(Seg::Text(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(
                "unterminated `{{` in template (for a literal `{{` write `{{ \"{{\" }}`)"
                    .to_owned(),
            );
        };
        let expr = after[..end].trim();
        if expr.is_empty() {
            return Err("empty `{{ }}` template expression".to_owned());
        }
        out.push(Seg::Expr(expr));
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
        out.push(Seg::Text(rest));
    }
    Ok(out)
}

fn has_template(v: &Value) -> bool {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if s.contains("{{") => return true,
            Value::Array(a) => stack.extend(a.iter()),
            Value::Object(o) => stack.extend(o.values()),
            _ => {}
        }
    }
    false
}

/// What expressions see.
pub(super) struct Vars<'a> {
    pub(super) params: &'a Value,
    pub(super) outputs: &'a Map<String, Value>,
    pub(super) last: &'a Value,
}

/// Run `f` on a helper thread with a large stack (see [`CEL_STACK_BYTES`]); a
/// panic inside it becomes an error message.
pub(super) fn on_cel_stack<R: Send>(
    f: impl FnOnce() -> R + Send,
) -> std::result::Result<R, String> {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("memstrata-cel".into())
            .stack_size(CEL_STACK_BYTES)
            .spawn_scoped(s, f)
            .map_err(|e| format!("cannot start the expression thread: {e}"))?;
        handle.join().map_err(|p| {
            format!(
                "expression evaluator panicked: {}",
                panic_message(p.as_ref())
            )
        })
    })
}

pub(super) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_owned()
    }
}

fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                cel::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                cel::Value::UInt(u)
            } else {
                cel::Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(o) => {
            let m: HashMap<String, cel::Value> =
                o.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::from(m)
        }
    }
}

/// Evaluates expressions against one set of variables. Lives on the CEL thread.
struct Evaluator<'a> {
    vars: &'a Vars<'a>,
    ctx: Option<cel::Context<'static, 'static>>,
}

impl<'a> Evaluator<'a> {
    fn new(vars: &'a Vars<'a>) -> Self {
        Evaluator { vars, ctx: None }
    }

    fn context(&mut self) -> &cel::Context<'static, 'static> {
        let vars = self.vars;
        self.ctx.get_or_insert_with(|| {
            let mut c = cel::Context::default();
            c.add_variable_from_value("params", to_cel(vars.params));
            c.add_variable_from_value("last", to_cel(vars.last));
            let steps: HashMap<String, cel::Value> = vars
                .outputs
                .iter()
                .map(|(id, out)| {
                    let entry: HashMap<String, cel::Value> =
                        HashMap::from([("output".to_owned(), to_cel(out))]);
                    (id.clone(), cel::Value::from(entry))
                })
                .collect();
            c.add_variable_from_value("steps", cel::Value::from(steps));
            c
        })
    }

    fn eval(&mut self, src: &str) -> std::result::Result<cel::Value, String> {
        if src.len() > MAX_EXPRESSION_BYTES {
            return Err(format!(
                "expression longer than {MAX_EXPRESSION_BYTES} bytes"
            ));
        }
        let program = cel::Program::compile(src)
            .map_err(|e| format!("does not compile: {}", one_line(&e.to_string())))?;
        program.execute(self.context()).map_err(|e| e.to_string())
    }

    fn eval_json(&mut self, src: &str) -> std::result::Result<Value, String> {
        let v = self.eval(src)?;
        v.json()
            .map_err(|e| format!("result cannot be converted to JSON: {e}"))
    }

    /// Resolve every template in `v`; `path` names the value in errors.
    fn resolve(&mut self, v: &Value, path: &str) -> std::result::Result<Value, String> {
        Ok(match v {
            Value::String(s) if s.contains("{{") => {
                let segs = parse_template(s).map_err(|e| format!("{path}: {e}"))?;
                if let [Seg::Expr(src)] = segs.as_slice() {
                    self.eval_json(src)
                        .map_err(|e| format!("{path}: template `{{{{ {src} }}}}`: {e}"))?
                } else {
                    let mut out = String::with_capacity(s.len());
                    for seg in segs {
                        match seg {
                            Seg::Text(t) => out.push_str(t),
                            Seg::Expr(src) => {
                                let v = self.eval_json(src).map_err(|e| {
                                    format!("{path}: template `{{{{ {src} }}}}`: {e}")
                                })?;
                                match v {
                                    Value::String(s) => out.push_str(&s),
                                    other => out.push_str(&other.to_string()),
                                }
                            }
                        }
                    }
                    Value::String(out)
                }
            }
            Value::Array(a) => Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, x)| self.resolve(x, &format!("{path}[{i}]")))
                    .collect::<std::result::Result<_, _>>()?,
            ),
            Value::Object(o) => {
                let mut m = Map::with_capacity(o.len());
                for (k, x) in o {
                    m.insert(k.clone(), self.resolve(x, &format!("{path}.{k}"))?);
                }
                Value::Object(m)
            }
            other => other.clone(),
        })
    }
}

pub(super) fn resolve_parameters(
    parameters: &Value,
    vars: &Vars<'_>,
) -> std::result::Result<Value, String> {
    if !has_template(parameters) {
        return Ok(parameters.clone());
    }
    on_cel_stack(|| Evaluator::new(vars).resolve(parameters, "parameters"))?
}

/// The next step after a step whose `next` is `branches`: the first true condition wins.
pub(super) fn choose_branch(
    branches: &[Branch],
    vars: &Vars<'_>,
) -> std::result::Result<Option<String>, String> {
    on_cel_stack(|| {
        let mut ev = Evaluator::new(vars);
        for (j, b) in branches.iter().enumerate() {
            match ev.eval(&b.condition) {
                Ok(cel::Value::Bool(true)) => return Ok(Some(b.next.clone())),
                Ok(cel::Value::Bool(false)) => {}
                Ok(other) => {
                    return Err(format!(
                        "next[{j}].condition `{}` evaluated to a {}, not a bool",
                        b.condition,
                        other.type_of()
                    ));
                }
                Err(e) => return Err(format!("next[{j}].condition `{}` failed: {e}", b.condition)),
            }
        }
        Ok(None)
    })?
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn template_segments() {
        assert_eq!(parse_template("plain").unwrap(), vec![Seg::Text("plain")]);
        assert_eq!(parse_template("{{ a.b }}").unwrap(), vec![Seg::Expr("a.b")]);
        assert_eq!(
            parse_template("x={{ 1 + 2 }}!").unwrap(),
            vec![Seg::Text("x="), Seg::Expr("1 + 2"), Seg::Text("!")]
        );
        assert_eq!(
            parse_template(r#"{{ "{{" }}"#).unwrap(),
            vec![Seg::Expr(r#""{{""#)]
        );
        assert!(parse_template("{{ open").is_err());
        assert!(parse_template("{{   }}").is_err());
    }

    #[test]
    fn deep_expressions_do_not_overflow_the_callers_stack() {
        // ~90 nested parentheses overflow a 2 MiB stack in an unoptimised build
        // if parsed in place; on the CEL thread they are fine.
        let params = json!({});
        let outputs = Map::new();
        let vars = Vars {
            params: &params,
            outputs: &outputs,
            last: &Value::Null,
        };
        let src = format!("{{{{ {}1{} }}}}", "(".repeat(90), ")".repeat(90));
        let v = resolve_parameters(&json!({ "x": src }), &vars).unwrap();
        assert_eq!(v, json!({ "x": 1 }));
        let too_deep = format!("{}true{}", "(".repeat(200), ")".repeat(200));
        let r = choose_branch(&[Branch::new(too_deep, "a")], &vars);
        assert!(r.is_err());
    }
}
