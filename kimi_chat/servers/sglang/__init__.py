"""kimi_chat as SGLang's tool-call detector and reasoning detector.

Register, then serve::

    KIMI_CHAT_SGLANG_NAMES=kimi_k2 python -m sglang.launch_server --model-path MODEL \\
        --tool-call-parser kimi_k2 --reasoning-parser kimi_k2

With the package installed (``pip install -e '.[sglang]'`` in the checkout), the ``sglang.srt.plugins``
entry point ``kimi_chat`` runs
:func:`register` in every SGLang process (before the command line is parsed). It always registers
the name ``kimi_chat`` (``--tool-call-parser kimi_chat --reasoning-parser kimi_chat``) and, when
``$KIMI_CHAT_SGLANG_NAMES`` lists it, ``kimi_k2`` in place of the built-in. Use ``kimi_k2``: SGLang
generates ``functions.NAME:IDX`` tool-call ids (the ids Kimi's chat template and the model expect
in the history) only for the parser named ``kimi_k2``; under any other name the ids are
``call_<uuid>``. (SGLang's detectors return no ids: the model's own header is not passed on.)

How the two halves meet (SGLang 0.5.23 ``serving_chat``): the reasoning detector sees each chunk
first; once reasoning has ended it returns the raw rest as ``normal_text``, which SGLang hands to the
tool-call detector; at the end both are flushed (``finish``). SGLang gives the reasoning detector no
prompt: ``force_reasoning`` (SGLang sets it unless ``chat_template_kwargs`` has ``thinking: false``)
means the output starts inside reasoning, a leading ``<think>`` being accepted (K2.5 and K2.6 with their
prefilled ``<think>``, and K2-Thinking, which opens with ``<think>``).

Diagnostics go to the logger ``kimi_chat.integrations.sglang`` (levels: see
:mod:`kimi_chat.servers.diagnostics`); a call that is not executable (cut before its arguments)
is not returned, only logged.

Kimi-K3: the same classes; the family comes from the tokenizer SGLang passes each detector (or
``$KIMI_CHAT_DIALECT``; a detector built without a tokenizer reads the SGLang server's own tokenizer).
Register them as ``kimi_k3`` (``KIMI_CHAT_SGLANG_NAMES=kimi_k3``): SGLang keeps K3's special tokens in
the decoded text only for that reasoning parser name (otherwise only when the request has tools) and
makes K3 ids (``NAME:N``) only for that tool parser name. With thinking off (``force_reasoning``
false) the reasoning detector hands the output on behind the response channel's open tag, so the tool
detector always reads "after the think channel". The reasoning detector's ``get_think_end_token_ids``
(SGLang's reasoning gate) are the family's: K3's think channel close tag by its ids.

``tool_choice="required"`` / a named function, and ``response_format`` ``json_object`` / ``json_schema``,
both families: kimi_chat's constraint (the Kimi format the parser runs, the schemas by llguidance) as the
request's EBNF, with ``--grammar-backend llguidance`` (and ``--reasoning-parser`` for a reasoning model);
otherwise SGLang's own (:mod:`kimi_chat.servers.sglang.constraint`).

SGLang hands its detectors text only (``parse_streaming_increment(new_text)``: no token ids), so a
marker the model typed as ordinary tokens (a ``</think>`` it mentions inside its reasoning) reads as the
marker here; the vLLM plugin gets each delta's ids and the tokenizer and tells the two apart.

The tool-call detector parses ``<think>``/``</think>`` as plain text (it cannot tell whether a
reasoning detector ran before it); after a reasoning block, a stray ``</think>`` in the content is
therefore kept as text rather than dropped.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest
from sglang.srt.function_call.base_format_detector import BaseFormatDetector
from sglang.srt.function_call.core_types import StreamingParseResult, StructureInfo, ToolCallItem
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.parser.reasoning_parser import BaseReasoningFormatDetector, ReasoningParser
from sglang.srt.parser.reasoning_parser import StreamingParseResult as ReasoningResult

from ... import markers as M
from ...families import Family
from ...output import ToolCallStatus
from ..stages import BodyStage, Merged, ReasoningStage, tools_as_dicts, track_streamed
from ..family import choose_family
from ..hooks import serving_of
from .constraint import install as install_constraint
from .constraint import LOGGER, install_request, served_dialect, server_tokenizer
from .constraint import kimi_structure_constraint

def _family(tokenizer: Any) -> Family:
    """The family of one detector: from its own tokenizer; a detector SGLang builds without one (for the
    structural tag of ``tool_choice``, for instance) reads the server's tokenizer. Nothing is kept
    between detectors: two tokenizers in one process each get their own family."""
    return choose_family(tokenizer if tokenizer is not None else server_tokenizer(), None, LOGGER)

__all__ = ["NAME", "KimiChatDetector", "KimiChatReasoningDetector", "register"]

NAME = "kimi_chat"
NAMES_ENV = "KIMI_CHAT_SGLANG_NAMES"



class KimiChatDetector(BaseFormatDetector):
    """Content and tool calls (SGLang ``FunctionCallParser`` detector)."""

    def __init__(self, tokenizer: Any = None) -> None:
        super().__init__()
        self._tokenizer = tokenizer if tokenizer is not None else server_tokenizer()
        family = _family(tokenizer)
        self.family = family.name
        self._serving = serving_of(family)
        self.bot_token, self.eot_token = self._serving.TOOL_SECTION
        self._stage: BodyStage | None = None

    def _new_stage(self, tools: list[Any]) -> BodyStage:
        # K3 (every model reasons): the text after the think channel (our reasoning detector hands it over
        # so, thinking off included); K2: <think> is plain text here (see the module docstring)
        return BodyStage(tools=tools_as_dicts(tools), after_reasoning=self._serving.ALWAYS_REASONS, logger=LOGGER,
                         family=self.family)

    @classmethod
    def parses_without_tools(cls) -> bool:
        """Parse even when the request declares no tools: markers never reach the content."""
        return True

    def has_tool_call(self, text: str) -> bool:
        """Any Kimi marker: then the parsed content (markers dropped) replaces the raw text."""
        return self._serving.MARKER_PATTERN.search(text) is not None

    def detect_and_parse(self, text: str, tools: list[Any]) -> StreamingParseResult:
        self._stage = st = self._new_stage(tools)
        st.feed(text)
        st.finish()
        calls = [ToolCallItem(tool_index=i, name=c.name or "", parameters=c.arguments) for i, c in enumerate(st.calls)]
        return StreamingParseResult(normal_text=st.message.content or "", calls=calls)

    def parse_streaming_increment(self, new_text: str, tools: list[Any]) -> StreamingParseResult:
        if self._stage is None:
            self._stage = self._new_stage(tools)
        return self._result(self._stage.feed(new_text))

    def finish(self, tools: list[Any]) -> StreamingParseResult:
        if self._stage is None:
            return StreamingParseResult()
        return self._result(self._stage.finish())

    @property
    def incomplete_tool_call_indices(self) -> set[int]:
        """Calls the output left unclosed (SGLang then does not report ``finish_reason=tool_calls``), by
        the indices the client sees."""
        if self._stage is None:
            return set()
        unclosed = (self._stage.client_index(c) for c in self._stage.message.tool_calls
                    if c.status is ToolCallStatus.UNCLOSED)
        return {i for i in unclosed if i is not None}

    def _result(self, m: Merged) -> StreamingParseResult:
        calls = []
        for c in m.calls:
            track_streamed(self, c.index, c.name, c.arguments)
            calls.append(ToolCallItem(tool_index=c.index, name=c.name, parameters=c.arguments))
        return StreamingParseResult(normal_text=m.content or "", calls=calls)

    def structure_info(self):  # noqa: ANN201 - SGLang's _GetInfoFunc
        # K3, as SGLang's KimiK3Detector: NotImplementedError (only its model-native structural tag)
        structure = self._serving.sglang_call_structure()

        def get_info(name: str) -> StructureInfo:
            begin, end, trigger = structure(name)
            return StructureInfo(begin=begin, end=end, trigger=trigger)

        return get_info

    def kimi_structure_constraint(self, tools: Any, tool_choice: Any, parallel_tool_calls: bool) -> Any:
        """A forced tool choice's constraint: kimi_chat's, ``("ebnf", LARK)``, where it applies, else
        ``None`` (SGLang's own): :mod:`kimi_chat.servers.sglang.constraint`, which asks this first."""
        return kimi_structure_constraint(tools, tool_choice, parallel_tool_calls, serving=self._serving,
                                         tokenizer=self._tokenizer, logger=LOGGER)

    def get_structural_tag_name(self) -> str | None:
        return self._serving.SGLANG_STRUCTURAL_TAG_NAME  # K2: xgrammar's built-in "kimi"; K3: none

    def get_structural_tag(self, tools: Any = None, tool_choice: Any = "auto", thinking_mode: bool = False,
                           parallel_tool_calls: bool = True) -> Any:
        """K3: SGLang's own K3 XTML structural tag (``kimik3_structural_tag``); K2: xgrammar's ``kimi``."""
        tag = self._serving.sglang_structural_tag(tools, tool_choice, thinking_mode, parallel_tool_calls)
        if tag is None:
            return super().get_structural_tag(tools, tool_choice, thinking_mode, parallel_tool_calls)
        return tag

    def get_auto_tool_call_structural_tag(self, tools: Any = None, thinking_mode: bool = False,
                                          parallel_tool_calls: bool = True) -> Any:
        tag = self._serving.sglang_auto_structural_tag(tools, thinking_mode, parallel_tool_calls)
        if tag is None:
            return super().get_auto_tool_call_structural_tag(tools, thinking_mode, parallel_tool_calls)
        return tag


class KimiChatReasoningDetector(BaseReasoningFormatDetector):
    """Reasoning (SGLang ``ReasoningParser`` detector): splits reasoning off, hands the rest on raw."""

    def __init__(
        self,
        stream_reasoning: bool = True,
        force_reasoning: bool = False,
        continue_final_message: bool = False,
        previous_content: str = "",
        force_nonempty_content: bool = False,
        tokenizer: Any = None,
    ) -> None:
        served = served_dialect()
        if served is not None and served.always_thinks:  # (Kimi-K2.7-Code: its prompt always opens <think>,
            force_reasoning = True                       # whatever the request's thinking switch says)
        super().__init__(
            M.THINK_BEGIN.text,
            M.THINK_END.text,
            force_reasoning=force_reasoning,
            stream_reasoning=stream_reasoning,
            tool_start_token=M.TOOL_CALLS_SECTION_BEGIN.text,
            continue_final_message=continue_final_message,
            previous_content=previous_content,
            reasoning_default="thinking",
            force_nonempty_content=force_nonempty_content,
        )
        prefilled: bool | None = bool(force_reasoning)
        family = _family(tokenizer)
        self.family = family.name
        self._serving = serving_of(family)
        answer_open = self._serving.ANSWER_OPEN
        self._lead: str | None = None  # K3 thinking off: the response channel's open tag, handed on first
        if answer_open is not None and not force_reasoning:
            prefilled, self._lead = None, answer_open
        elif continue_final_message and previous_content:
            # the assistant message being continued says where the output starts
            last_open = previous_content.rfind(M.THINK_BEGIN.text)
            last_close = previous_content.rfind(M.THINK_END.text)
            if last_open > last_close:
                prefilled = True
            elif last_close >= 0:
                prefilled = None  # reasoning already closed: everything is the rest
        self._prefilled = prefilled
        self._stage: ReasoningStage | None = None
        self._held_reasoning: list[str] = []  # stream_reasoning=False: reasoning is sent at its end

    def get_think_end_token_ids(self, tokenizer: Any) -> list[int]:
        """The ids that end reasoning (SGLang's reasoning gate and reasoning-token count): the family's
        (K3: the think channel's close tag), else SGLang's encoding of ``</think>``."""
        ids = self._serving.sglang_think_end_ids(tokenizer)
        return ids if ids is not None else super().get_think_end_token_ids(tokenizer)

    def _get_stage(self) -> ReasoningStage | None:
        if self._prefilled is None:
            return None
        if self._stage is None:
            self._stage = ReasoningStage(prefilled=self._prefilled, logger=LOGGER, family=self.family)
        return self._stage

    def _led(self, text: str) -> str:
        """K3 with thinking off: the output starts inside the response channel the prompt opened; the
        tool detector is told so by that channel's open tag before the first text."""
        lead, self._lead = self._lead, None
        return (lead or "") + text

    def detect_and_parse(self, text: str) -> ReasoningResult:
        if self._prefilled is None:
            return ReasoningResult(normal_text=self._led(text))
        reasoning, rest = ReasoningStage.split(text, prefilled=self._prefilled, logger=LOGGER, family=self.family)
        return self._maybe_apply_force_nonempty_content(ReasoningResult(normal_text=rest, reasoning_text=reasoning))

    def parse_streaming_increment(self, new_text: str) -> ReasoningResult:
        stage = self._get_stage()
        if stage is None:
            return ReasoningResult(normal_text=self._led(new_text) if new_text else new_text)
        reasoning, rest = stage.feed(new_text)
        self._in_reasoning = not stage.ended
        return self._out(reasoning, rest, done=rest is not None)

    def finish(self) -> ReasoningResult:
        stage = self._stage
        if stage is None:
            return ReasoningResult()
        reasoning, rest = stage.finish()
        return self._out(reasoning, rest, done=True)

    def _out(self, reasoning: str | None, rest: str | None, *, done: bool) -> ReasoningResult:
        if not self.stream_reasoning:
            if reasoning:
                self._held_reasoning.append(reasoning)
            if not done:
                return ReasoningResult()
            reasoning = "".join(self._held_reasoning) or None
            self._held_reasoning = []
        if self._force_nonempty_content:
            self._accumulated_reasoning += reasoning or ""
        return ReasoningResult(normal_text=rest, reasoning_text=reasoning)


def register(names: Iterable[str] | None = None) -> None:
    """Add both detectors to SGLang's registries (``FunctionCallParser.ToolCallParserEnum`` and
    ``ReasoningParser.DetectorMap``) under ``names`` (default: ``kimi_chat`` plus the comma-separated
    names in ``$KIMI_CHAT_SGLANG_NAMES``, e.g. ``kimi_k2`` to replace the built-in). Idempotent; also
    the ``sglang.srt.plugins`` entry point."""
    if names is None:
        env = os.environ.get(NAMES_ENV, "")
        names = [NAME] + [n.strip() for n in env.split(",") if n.strip() and n.strip() != NAME]
    for n in names:
        FunctionCallParser.ToolCallParserEnum[n] = KimiChatDetector
        ReasoningParser.DetectorMap[n] = KimiChatReasoningDetector
    install_constraint(FunctionCallParser)  # a forced tool choice: kimi_chat's constraint (.constraint)
    install_request(ChatCompletionRequest)  # ... for the request's thinking switch


register()
