"""A small deterministic embedder for the tests and the bench: it stands in for the llama.cpp
embedding model the app uses. A hashed bag of words (each word to a dimension and a sign by
its BLAKE2 hash, so the same everywhere, unlike ``hash()``), after a few synonyms are mapped
to one word: that is what lets a paraphrase ("car upkeep") meet a text ("automobile
maintenance") that shares none of its words, as a real model's vectors do."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

SYNONYMS = {
    "car": "automobile",
    "cars": "automobile",
    "vehicle": "automobile",
    "upkeep": "maintenance",
    "servicing": "maintenance",
    "repair": "maintenance",
}
_WORD = re.compile(r"\w+")


class HashedEmbedder:
    def __init__(self, name: str = "hashed-bow", dims: int = 256) -> None:
        self.name = name
        self.dims = dims
        self.calls = 0
        self.texts = 0
        self._slots: dict[str, tuple[int, float]] = {}

    def _slot(self, word: str) -> tuple[int, float]:
        slot = self._slots.get(word)
        if slot is None:
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            slot = (value % self.dims, 1.0 if value >> 63 else -1.0)
            self._slots[word] = slot
        return slot

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        self.texts += len(texts)
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            slots = [self._slot(SYNONYMS.get(w, w)) for w in _WORD.findall(text.lower())]
            if slots:
                index, sign = zip(*slots, strict=True)
                out[row] = np.bincount(index, weights=sign, minlength=self.dims)
        return out
