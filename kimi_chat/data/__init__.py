"""Training data: every trained token exactly what the model generated, in the context it saw.

**The trap.** The official K2-Thinking, K2.5 and K2.6 templates write every assistant turn up to the last
one without tool calls as ``<think></think>`` + content: their reasoning is dropped. A dataset rendered the
obvious way (``render_tokens(conversation, add_generation_prompt=False)``, or ``apply_chat_template`` in a
trainer) trains the model to answer with an empty reasoning block, and a third or more of the text (the
reasoning) never reaches training. Nothing fails and nothing warns (``render_tokens`` now does).

**A sample, as generated.** A sample trains assistant messages. For each trained assistant message ``i``
its ``input_ids`` hold, first, the official ids of ``messages[:i]`` plus the generation prompt (exactly the
prompt a server renders for that request), then message ``i`` as the model generated it after that prompt:
its reasoning kept, its content and tool calls, through its end-of-turn marker (``<|im_end|>``; Kimi-K3's
``<|close|>message<|sep|><|end_of_msg|>``), and nothing the generation prompt already wrote (K2.5 / K2.6
open ``<think>`` in the prompt, K3 its think channel: that is not trained). A sample ends with its last
trained message's end marker. ``labels`` are the ids at trained positions and ``-100`` elsewhere;
``assistant_masks`` 1 where trained; ``turns`` the indices of the messages the sample trains.

Every assistant message is trained in exactly one sample, unless it says ``"train": false`` or
``"weight": 0`` (then it is context only), or is the conversation's first message (no request precedes it:
context only, reported as ``leading_assistant``). Samples are as few as the dialect allows: a turn joins the
sample of the turn before when the next request's official prompt starts with that sample's ids (prefix
stability, asked of the rendering itself through :func:`kimi_chat.extend_tokens`), else a new sample starts
with that request's prompt. So: one sample per conversation where the rendering keeps every assistant turn
as generated (K2-Instruct rev1 / rev2 / 0905, Kimi-K3, K2.6 with ``preserve_thinking``), one per stretch
up to a final answer (the next request re-renders it without its reasoning) in K2-Thinking, K2.5 and K2.6
by default.

Cost: a stretch of turns is built from one rendering of its last request, checked turn by turn against the
first turn's request (rendered as text only: equal texts ending with a special token are equal ids) and each
turn as generated (where a check fails, turn by turn with ``extend_tokens``, which tokenizes only what a
request adds); the turns as generated come from one rendering of the assistant messages alone, in every
dialect. The first request's ids are kept as a known prompt, so the next stretch's request tokenizes only
what follows them. Where one sample holds the conversation, linear in its length; where the dialect re-renders
each final answer (one sample per stretch, each holding the history) the samples themselves grow
quadratically, and so does the cost, in step with the ids written (``benchmarks/data_core.py``).

How a turn is written as generated: the dialect's template is asked for the turn on its own (an assistant
turn's text depends on the message alone); where it writes a final answer as history, reasoning dropped,
it is asked for the turn as it writes a turn with tool calls (whose reasoning it keeps) and the tool-call
section is taken out. Both facts are probed on the rendering once per dialect, options and tokenizer, not
listed by name. A turn that cannot follow its generation prompt is refused naming the message (reasoning
under ``thinking=False``; a tokenizer that encodes the opened ``<think>`` as text). Options that hold data of
the whole conversation are not split per request; Kimi-K3's ``image_prompts`` (one per image) are a field of
the row instead, written into each sample as the official encoder writes them (:mod:`kimi_chat.data.image_prompts`).

**Reasoning policies** (``reasoning=``):

* ``"as-sampled"`` (default): the samples above;
* ``"keep"``: render with every turn's reasoning kept, one sample per conversation: K2.6's
  ``preserve_thinking=True``, Kimi-K3 as is, dialects without reasoning as is; refused with an
  :class:`~kimi_chat.errors.UnsupportedOptionError` where the rendering cannot keep earlier reasoning
  (K2-Thinking, K2.5: no ``preserve_thinking``);
* ``"official"``: one official rendering of the whole conversation, as a trainer's ``apply_chat_template``
  would: the reasoning the template drops is dropped (counted: the ``reasoning_dropped`` finding).

**What is reported** (:mod:`kimi_chat.data.findings`): per row, reasoning the official rendering drops,
double-encoded tool arguments, tool-call ids not of the ``functions.NAME:N`` form, calls to undeclared
tools, marker text typed in content, samples over ``max_length`` (dropped, or truncated at a turn
boundary), conversations that do not end with an assistant message or start with one, and bad rows (the
:class:`~kimi_chat.errors.KimiChatError` naming the message index and field).

**Preference pairs** (DPO, :func:`preference_pair`, :func:`preference_batch`): ``prompt_ids`` (the request,
rendered once: both answers share it by construction; given as two whole conversations, their prompts must
render to the same ids), ``chosen_ids`` and ``rejected_ids`` (each answer as generated after it).

**RL rollouts, token in token out** (:func:`start_rollout`, :func:`extend_rollout`): the ids the engine sampled
are kept exactly (a completion cut before its end marker is closed with it); the messages that follow are
rendered officially; where the official rendering of the extended conversation would write the history
differently (a Thinking dialect dropping earlier reasoning), the rollout keeps the sampled ids and records a
:class:`Divergence` (position, message) instead of re-rendering them (:func:`kimi_chat.extend_tokens`
answers ``None`` there).

The API: :func:`conversation_samples` (one conversation -> :class:`Sample` list), :func:`conversations_to_batch`
(rows -> ``pyarrow.RecordBatch`` of :data:`~kimi_chat.data.batch.SCHEMA` + findings: the core that
``datasets.map`` and Ray Data run; one tokenizer per worker), :func:`preference_pair`, :func:`extend_rollout`.
pyarrow (``pip install -e '.[data]' (in the checkout)``) is imported only by the batch functions.
"""

from __future__ import annotations

from .batch import COLUMNS, BatchResult, conversations_to_batch, row_conversation, samples_to_batch
from .findings import KINDS, Finding, conversation_findings, double_encoded_arguments
from .preference import PREFERENCE_COLUMNS, PreferenceBatch, preference_batch, preference_pair, preference_schema
from .rollouts import Divergence, Rollout, end_marker, extend_rollout, start_rollout
from .samples import (IGNORE_INDEX, REASONING_POLICIES, ConversationSamples, InvalidRowError, Sample,
                      conversation_samples, generated_turn, reasoning_options, trained_turns)

__all__ = [
    "BatchResult", "COLUMNS", "ConversationSamples", "Divergence", "Finding", "IGNORE_INDEX", "InvalidRowError",
    "KINDS", "PREFERENCE_COLUMNS", "PreferenceBatch", "REASONING_POLICIES", "Rollout", "Sample",
    "conversation_findings", "conversation_samples", "conversations_to_batch", "double_encoded_arguments",
    "end_marker", "extend_rollout", "generated_turn", "preference_batch", "preference_pair", "preference_schema",
    "reasoning_options", "row_conversation", "samples_to_batch", "start_rollout", "trained_turns",
]

# The pipeline on the batch core (kimi_chat.data.dataset, .pipeline, .ray_engine; docs/training-data.md):
# render_dataset runs it over a Hugging Face datasets.Dataset (datasets imported when called).
from .dataset import RenderedDataset, render_dataset, render_dataset_with_findings  # noqa: E402

__all__ += ["render_dataset", "render_dataset_with_findings", "RenderedDataset"]
