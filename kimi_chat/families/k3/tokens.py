"""Token-level rendering for the Kimi-K3 family: what :func:`kimi_chat.tokens.render_tokens` and
:func:`kimi_chat.tokens.extend_tokens` do with ``dialect="kimi-k3"``.

The official K3 tokenizer encodes the prompt **segment by segment** (``encoding_k3.build_chat_segments``):
each marker (``<|open|>``, ``<|close|>``, ``<|sep|>``, ``<|end_of_msg|>``, image prompts) with special
tokens allowed, every other segment as ordinary text. :mod:`kimi_chat.families.k3.render` writes exactly those
segments (markers and image prompts as template literals, the rest as text), and the family record says
``segment_wise``, so the ids are the layout's segment-wise encoding (:mod:`kimi_chat.tokens.segments`;
``== render_k3_ids == apply_chat_template(tokenize=True)``) and every token belongs to one segment: BPE never
merges across segments, so the attribution (``message_index``, ``spans``, ``assistant_mask`` from the
segments' ``trainable`` flags) is a per-segment token count, with no straddling token.

**Special-token policy** for K3 (``special_tokens=``), for special-token text (``<|open|>``,
``<|end_of_msg|>``, ``[EOS]``, ``<|reserved_token_163700|>``...) typed in a text segment (content,
names, tool names, arguments, tools, the response schema):

* ``"text"`` (default): ordinary text, as the official K3 tokenizer itself encodes it (its text
  segments disallow special tokens). The ids equal the oracle's.
* ``"strict"``: :class:`~kimi_chat.errors.RenderError` naming the message index and field (``tools``,
  ``response_schema``... for text of no message) when such text is in a text segment. Use it to
  refuse input that a server encoding the prompt *text* with special tokens allowed (a Jinja port
  such as llama.cpp's) would turn into markers.
* ``"special"``: each text segment encoded with special tokens allowed, so typed special-token text
  becomes the special id (segment by segment: what such a server's ids would be if it kept the official
  segmentation). Not what the official K3 tokenizer does; for reproducing or testing such servers.

A tokenizer without the family's special tokens is refused (:mod:`kimi_chat.tokens.vocabulary`, whose
:func:`vocabulary_problem` / :func:`check_vocabulary` this module re-exports under their former path).
"""

from __future__ import annotations

from ...tokens.vocabulary import check_vocabulary, vocabulary_problem

__all__ = ["check_vocabulary", "vocabulary_problem"]
