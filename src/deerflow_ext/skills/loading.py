"""What the model sees of the enabled skills: a list in the system prompt, a tool for a body.

Progressive disclosure: the prompt names each enabled skill and says what it is for, in a
line; the instructions themselves (the SKILL.md body, which may be long) enter the context
only as the result of a ``load_skill`` call, read from disk at that moment. A skill switched
off since the run began is no longer loadable (the tool reads the same file the prompt was
built from, and the set it was given).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from .catalog import Skill, split_front_matter

__all__ = ["LOAD_SKILL_TOOL", "load_skill_tool", "skills_prompt"]

LOAD_SKILL_TOOL = "load_skill"


def skills_prompt(skills: Sequence[Skill]) -> str:
    """The system prompt's skills section (empty without skills: the prompt is unchanged)."""
    if not skills:
        return ""
    lines = "\n".join(f"- {skill.name}: {skill.description}" for skill in skills)
    return (
        f"\n\nSkills you can use. Before following one, call `{LOAD_SKILL_TOOL}` with its name "
        f"to read its instructions:\n{lines}"
    )


class _LoadSkill(BaseModel):
    name: str = Field(description="the skill's name, as listed in the system prompt")


def load_skill_tool(skills: Sequence[Skill]) -> BaseTool:
    """The ``load_skill`` tool over ``skills``: made once per set (a tool's schema is
    inferred when it is made, milliseconds a run would otherwise pay)."""
    return _tool(tuple(skills))


@functools.lru_cache(maxsize=16)
def _tool(skills: tuple[Skill, ...]) -> BaseTool:
    by_name = {skill.name: skill for skill in skills}

    def load_skill(name: str) -> str:
        skill = by_name.get(name)
        if skill is None:
            known = ", ".join(sorted(by_name)) or "none"
            return f"no enabled skill named {name!r} (enabled: {known})"
        try:
            _, body = split_front_matter(skill.path.read_text(encoding="utf-8"))
        except OSError as exc:
            return f"skill {name!r} cannot be read: {exc.strerror or exc}"
        return body.strip()

    return StructuredTool.from_function(
        load_skill,
        name=LOAD_SKILL_TOOL,
        description="Read the full instructions of one of the skills listed in the system prompt.",
        args_schema=_LoadSkill,
    )
