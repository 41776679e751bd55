// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/**
 * @dev The token counter and the namespace filter, one storage slot (`FencingRegistry._counter`),
 * read by every acquisition:
 *
 *   bits  0..47   the highest token issued; the next one is that + 1
 *   bits 48..255  Bloom filter: bit 48 + (namespace % 208) is set when the constructor
 *                 assigns `namespace` (never set after it, never cleared)
 *
 * A clear bit proves the namespace has no admin; a set bit (its own, or a collision) costs one
 * cold read of its slot. Every accessor is an internal pure function: inlined, no call.
 */
type TokenCounter is uint256;

using TokenCounterLibrary for TokenCounter global;

/// @dev The filter's first bit in the counter's slot (`Names.namespaceOf` tests it in assembly).
uint256 constant FILTER_SHIFT = 48;
/// @dev The filter's width: a namespace's bit is FILTER_SHIFT + (namespace % FILTER_BITS).
uint256 constant FILTER_BITS = 208;

library TokenCounterLibrary {
    uint256 private constant _UINT48_MASK = (1 << 48) - 1;

    /// @dev The highest token issued (0 before the first).
    function latest(TokenCounter counter) internal pure returns (uint256) {
        return TokenCounter.unwrap(counter) & _UINT48_MASK;
    }

    /// @dev The counter with `token` as the highest issued, the filter kept. `token` must fit 48 bits
    /// (`PackedLeaseLibrary.pack` checks every token it stores): no carry into the filter.
    function withLatest(TokenCounter counter, uint256 token) internal pure returns (TokenCounter) {
        return TokenCounter.wrap((TokenCounter.unwrap(counter) & ~_UINT48_MASK) | token);
    }

    /// @dev False proves `namespace` has no admin (its filter bit is clear); true: read its slot.
    function mayBeAdministered(TokenCounter counter, bytes32 namespace) internal pure returns (bool) {
        return (TokenCounter.unwrap(counter) >> (FILTER_SHIFT + uint256(namespace) % FILTER_BITS)) & 1 != 0;
    }

    /// @dev The counter with `namespace`'s filter bit set (deployment only).
    function withAdministered(TokenCounter counter, bytes32 namespace) internal pure returns (TokenCounter) {
        return TokenCounter.wrap(TokenCounter.unwrap(counter) | 1 << (FILTER_SHIFT + uint256(namespace) % FILTER_BITS));
    }
}
