#!/usr/bin/env python3
"""Renders chat templates with Jinja2 itself, the way Hugging Face transformers does
(apply_chat_template: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols]), tojson = json.dumps(ensure_ascii=False, ...), raise_exception,
strftime_now), and writes the expected outputs that tests/test_chat_template.cpp compares
stave's interpreter against.

usage: render_chat_templates.py CASES_IN.json TEMPLATE_DIR OUT.json
  CASES_IN.json: [{"name", "template" (file in TEMPLATE_DIR), "context" {messages, tools?,
  add_generation_prompt, ...}}]; OUT.json gets each case plus "expected" (the rendered text) or
  "error" (the exception text)."""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    cases_path, template_dir, out_path = sys.argv[1:4]
    cases = json.load(open(cases_path, encoding="utf-8"))
    env = environment()
    out = []
    for case in cases:
        source = open(f"{template_dir}/{case['template']}", encoding="utf-8").read()
        ctx = dict(case["context"])
        ctx.setdefault("tools", None)
        ctx.setdefault("documents", None)
        result = dict(case)
        try:
            result["expected"] = env.from_string(source).render(**ctx)
        except Exception as e:  # the template refused the input
            result["error"] = str(e)
        out.append(result)
    json.dump(out, open(out_path, "w", encoding="utf-8"), ensure_ascii=False, indent=1)
    open(out_path, "a").write("\n")


if __name__ == "__main__":
    main()
