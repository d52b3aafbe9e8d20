"""The 16-bit word format of NeuroTrainer's vaults, streams and buffers: two elements per 32-bit word.

Shared by the row packer and unpacker (``hw``), the system golden model (``golden``) and the
compiler and executor (``sim``).

Format (Section 3.3.4: "BUF Input 1 pushes one 32bit input (one 32 bit operand or two 16 bit
operands) while BUF Input 2 pushes k 32bit inputs"; the vaults are 32-bit wide):

- A 32-bit word holds two 16-bit elements: the **first element of a pair in the low half**
  (bits 15..0), the second in the high half (bits 31..16), two's complement each.
- A tensor in a 16-bit layer is stored in *element slots*: slot ``s`` of a vault is half
  ``s mod 2`` of word ``s div 2``. Every placement starts at an even slot, so a placement of an
  odd number of elements leaves the high half of its last word unused; the compiler writes 0
  there (:func:`pack_words`).
- A stream in a 16-bit layer requests *words*: each request delivers (or stores) two
  consecutive elements of the stream, so the compiler's element-level innermost loop (the BUF2
  row's ``2 k`` lanes, a weight row) is halved.
- BUF Input 2 and the PE's result rows are ``k`` words: lane ``l``'s word holds the elements of
  lanes ``2 l`` and ``2 l + 1`` of the MAC array's ``2 k``-element vector (the MAC's 16-bit
  mode: half ``h`` of lane ``l`` is an independent 16-bit MAC).
- BUF Input 1 holds the scalar ``a`` of ``y = a x + y`` in both halves of a word (the MAC's
  half ``h`` multiplies half ``h`` of BUF1 by half ``h`` of BUF2). Its fill stream is packed
  like every other stream: the BUF1 row packer turns each 16-bit half of a vault word, low
  half first, into one BUF1 word ``e | e << 16`` (:func:`splat_halves`). A BUF1 block of ``W``
  elements takes ``ceil(W / 2)`` words; when ``W`` is odd, the high half of its last word is
  padding, dropped by the packer when the low half closed the block.
- END-MARK words stay whole words flagged ``end`` (data 0xFFFF in 16-bit streams, Section 3.3.1).
"""
import numpy as np

__all__ = ["ELEMENTS_PER_WORD16", "FIRST_HALF", "elements_per_word", "words_for", "pack_words",
           "unpack_words", "splat_halves"]

#: 16-bit elements per 32-bit vault word.
ELEMENTS_PER_WORD16 = 2

#: The half of a word that holds the first element of a pair: 0 = bits 15..0.
FIRST_HALF = 0

def elements_per_word(bits):
    """Elements per 32-bit word for an element width of ``bits`` (16 or 32)."""
    return ELEMENTS_PER_WORD16 if bits == 16 else 1


def words_for(elements, bits):
    """Words holding ``elements`` element slots."""
    per = elements_per_word(bits)
    return -(-int(elements) // per)


def pack_words(elements, bits):
    """Words of an element sequence (int64): pairs, first element in the low half; an odd tail padded with 0."""
    elements = np.asarray(elements, dtype=np.int64)
    if bits == 32:
        return elements & 0xFFFFFFFF
    halves = np.zeros(2 * words_for(elements.size, 16), dtype=np.int64)
    halves[:elements.size] = elements & 0xFFFF
    return halves[0::2] | (halves[1::2] << 16)


def unpack_words(words, bits):
    """The elements of words (int64, unsigned 16-bit values in 16-bit mode), first the low half of each word."""
    words = np.asarray(words, dtype=np.int64)
    if bits == 32:
        return words
    return np.stack([words & 0xFFFF, (words >> 16) & 0xFFFF], axis=-1).reshape(-1)


def splat_halves(elements):
    """BUF1 words of 16-bit elements: each element in both halves."""
    elements = np.asarray(elements, dtype=np.int64) & 0xFFFF
    return elements | (elements << 16)
