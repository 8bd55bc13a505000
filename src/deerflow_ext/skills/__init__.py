"""Skills: instructions the lead agent loads when it needs them (progressive disclosure).

This package owns DeerFlow's skills layout — folders holding a ``SKILL.md`` whose YAML front
matter gives ``name`` and ``description``, under ``skills/public`` and ``skills/custom`` —
which of them ``extensions_config.json`` leaves enabled (:mod:`.catalog`), the lines the lead
agent's system prompt lists them by, and the ``load_skill`` tool that hands the model a
skill's body only when it asks for it (:mod:`.loading`). The agent builder wires them in and
reports the names as the assembly's ``enabled_skills``; nothing here knows the agent.
"""

from __future__ import annotations

from .catalog import Skill, SkillShelf, scan_skills
from .loading import LOAD_SKILL_TOOL, load_skill_tool, skills_prompt

__all__ = ["LOAD_SKILL_TOOL", "Skill", "SkillShelf", "load_skill_tool", "scan_skills", "skills_prompt"]
