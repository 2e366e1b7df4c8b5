"""The prompts only the lab sends: questions written from passages, for training data.

crag's own prompts (what a run sends) are `crag.prompts`.
"""

from __future__ import annotations

QUESTION_WRITER_SYSTEM = (
    "You write exam questions. Given a passage, write ONE specific question that the "
    "passage answers, as a reader would ask it without seeing the passage. Do not copy "
    "whole sentences. Reply with the question only, on one line, ending with '?'."
)

QUESTION_WRITER_USER = "<data>\n{passage}\n</data>\n\nQuestion:"

# Questions whose answers are known by construction (the reader's training data). The
# instructions come before the passage, so llama.cpp reuses their tokens across calls.
FACT_QUESTIONS_SYSTEM = "You write quiz questions about technical documentation."

FACT_QUESTIONS_USER = (
    "Read the passage at the end. Write three questions about three different facts it "
    "states. Each question must be answered by one sentence of the passage, must make "
    "sense to a reader who has not seen the passage (name the program, command, option or "
    "setting it is about, never 'the passage'), and must not contain its own answer. After "
    "each question give the answer: a short phrase of 1 to 8 words copied exactly from the "
    "passage, not a whole sentence.\n\n"
    "Reply in this format:\nQ: <question>\nA: <answer>\n\n"
    "Passage:\n<data>\n{passage}\n</data>"
)
