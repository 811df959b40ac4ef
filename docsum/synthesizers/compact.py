"""`compact` (the default mode): pack the passages into the fewest parts that
fill the window, then refine part by part."""

from __future__ import annotations

from typing import Any

from docsum.synthesizers.refine import Refine


class CompactAndRefine(Refine):
    """Pack the chunks into the fewest window-filling parts, then refine."""

    label = "compact"

    def plan_parts(self, query: str, text_chunks: list[str], **kw: Any) -> list[str]:
        qa, refine = self._templates(query, kw)
        # Size with whichever prompt leaves less room, the refine prompt counted
        # with a full-length existing answer, so no part is split again.
        qa_room = self.budget.available(qa)
        refine_room = self.budget.available(refine, extra_tokens=self.llm.metadata.num_output)
        if refine_room < qa_room:
            return self.budget.repack(refine, text_chunks, extra_tokens=self.llm.metadata.num_output)
        return self.budget.repack(qa, text_chunks)
