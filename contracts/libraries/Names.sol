// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {FILTER_BITS, FILTER_SHIFT, TokenCounter} from "../types/TokenCounter.sol";

/**
 * @dev Names and their namespaces, pure functions (inlined into the registry: no call).
 *
 * A name's namespace is its bytes before its first `/` (the prefix), identified by
 * `keccak256(prefix)`; a name without `/` has none. An address namespace's prefix is "0x" and the
 * 40 lowercase hex digits of its address ({addressNamespace}); only a prefix of 42 bytes starting
 * "0x" can be one ({isAddressShaped}).
 */
library Names {
    /// @dev "0x" as the top two bytes of a word: an address namespace's prefix starts so.
    uint256 private constant _HEX_PREFIX = 0x3078;
    /// @dev Bytes in an address namespace's prefix: "0x" and 40 lowercase hex digits.
    uint256 internal constant ADDRESS_PREFIX_LENGTH = 42;

    /// @dev Find `name`'s namespace, and whether an acquisition must read its slot: `found` if `name`
    /// has a `/` (the prefix: its bytes before the first one; `namespace` = keccak256(prefix)), and
    /// `read` if then the prefix's bit in the deployer's filter (`counter`'s bits 48..255) is set, or
    /// the prefix is address-shaped (42 bytes starting "0x"), which never uses the filter. Pass
    /// `counter` 0 when only the namespace is wanted.
    ///
    /// 32 bytes a step, no loop over bytes: a word holds a `/` iff one of its bytes XOR 0x2f is
    /// zero, marked exactly (bit 7 of that byte; no carry between bytes) by
    /// `~(((x & 0x7f..) + 0x7f..) | x | 0x7f..)`. The first mark is then smeared down to the word's
    /// last byte; the marked bytes, counted by one multiplication (each byte adds its 1; 32 at most,
    /// so no carry reaches the top byte), are the bytes from the first `/` on: 32 minus that count
    /// is its index in the word.
    ///
    /// All in one assembly block, the filter and the address test included: written as Solidity
    /// around the block, the address test cost every acquisition 72 to 99 gas (the optimizer stopped
    /// inlining this function); here it costs none measurable on an open name (docs/benchmarks.md).
    function namespaceOf(string calldata name, TokenCounter counter)
        internal
        pure
        returns (bool found, bool read, bytes32 namespace)
    {
        assembly ("memory-safe") {
            let start := name.offset
            let end := add(start, name.length)
            for { let p := start } lt(p, end) { p := add(p, 32) } {
                let x := xor(calldataload(p), 0x2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f)
                let low := 0x7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f
                let marks := not(or(or(add(and(x, low), low), x), low))
                let rest := sub(end, p)
                // Bytes past the name's end are not the name's: clear their marks.
                if lt(rest, 32) { marks := and(marks, not(shr(shl(3, rest), not(0)))) }
                if marks {
                    marks := or(marks, shr(8, marks))
                    marks := or(marks, shr(16, marks))
                    marks := or(marks, shr(32, marks))
                    marks := or(marks, shr(64, marks))
                    marks := or(marks, shr(128, marks))
                    let fromSlash := shr(248, mul(shr(7, marks), 0x0101010101010101010101010101010101010101010101010101010101010101))
                    let length := sub(add(p, sub(32, fromSlash)), start)
                    let m := mload(0x40)
                    calldatacopy(m, start, length)
                    namespace := keccak256(m, length)
                    found := 1
                    // The filter: bit 48 + (namespace % 208) of the counter's slot (see TokenCounter).
                    read := and(shr(add(FILTER_SHIFT, mod(namespace, FILTER_BITS)), counter), 1)
                    if iszero(read) {
                        // Address-shaped: 42 bytes, then the name has 43+, so its first two are its own.
                        read := and(eq(length, ADDRESS_PREFIX_LENGTH), eq(shr(240, calldataload(start)), _HEX_PREFIX))
                    }
                    break
                }
            }
        }
    }

    /// @dev {namespaceOf} for a name in memory (a byte at a time: {claimNext} and deployment).
    function namespaceOfMemory(bytes memory name, TokenCounter counter)
        internal
        pure
        returns (bool found, bool read, bytes32 namespace)
    {
        uint256 length = name.length;
        for (uint256 i; i < length; ++i) {
            if (name[i] == 0x2f) {
                assembly ("memory-safe") {
                    namespace := keccak256(add(name, 32), i)
                }
                // The address test only where the filter says no: the usual case pays for the filter only.
                return (true, counter.mayBeAdministered(namespace) || isAddressShaped(name, i), namespace);
            }
        }
    }

    /// @dev Whether the first `length` bytes of `text` are address-shaped: 42 bytes starting "0x".
    /// (Only "0x" and 40 lowercase hex digits can ever have an admin: see {addressNamespace}.)
    function isAddressShaped(bytes memory text, uint256 length) internal pure returns (bool) {
        return length == ADDRESS_PREFIX_LENGTH && text[0] == 0x30 && text[1] == 0x78;
    }

    /// @dev `keccak256("0x" + 40 lowercase hex digits of account)`: the id of the namespace that
    /// `account` administers by construction. The address's first 16 bytes give 32 digits, its last
    /// 4 bytes 8 more ({hexDigits}); written past the free memory pointer (scratch, never read
    /// again). No loop over digits: a loop of 40 cost about 4,100 gas a call, this about 400.
    function addressNamespace(address account) internal pure returns (bytes32 namespace) {
        bytes32 high = hexDigits(bytes16(bytes20(account)));
        bytes32 low = hexDigits(bytes16(bytes20(account) << 128));
        assembly ("memory-safe") {
            let m := mload(0x40)
            mstore(add(m, 2), high) // digits 1-32 at bytes 2..33
            mstore(add(m, 34), low) // digits 33-40 at bytes 34..41 (the rest is not hashed)
            mstore8(m, 0x30) // "0"
            mstore8(add(m, 1), 0x78) // "x"
            namespace := keccak256(m, ADDRESS_PREFIX_LENGTH)
        }
    }

    /// @dev The 32 lowercase hex digits of `data`, one a byte, most significant first. The nibbles
    /// are spread apart by halving steps (8 bytes, 4, 2, 1, then a nibble a byte: each step moves
    /// the lower half of every group one group-width right, into the zero bytes the step before
    /// made), then each nibble n becomes '0' + n, plus 39 more when n > 9 ('a' is '0' + 49): n + 6
    /// carries into bit 4 exactly when n > 9, and 39 times that bit stays inside its byte (n < 16,
    /// so no byte exceeds 0x66 and nothing carries into the next).
    function hexDigits(bytes16 data) private pure returns (bytes32 digits) {
        digits = bytes32(data) & 0xFFFFFFFFFFFFFFFF000000000000000000000000000000000000000000000000
            | (bytes32(data) & 0x0000000000000000FFFFFFFFFFFFFFFF00000000000000000000000000000000) >> 64;
        digits = digits & 0xFFFFFFFF000000000000000000000000FFFFFFFF000000000000000000000000
            | (digits & 0x00000000FFFFFFFF000000000000000000000000FFFFFFFF0000000000000000) >> 32;
        digits = digits & 0xFFFF000000000000FFFF000000000000FFFF000000000000FFFF000000000000
            | (digits & 0x0000FFFF000000000000FFFF000000000000FFFF000000000000FFFF00000000) >> 16;
        digits = digits & 0xFF000000FF000000FF000000FF000000FF000000FF000000FF000000FF000000
            | (digits & 0x00FF000000FF000000FF000000FF000000FF000000FF000000FF000000FF0000) >> 8;
        digits = (digits & 0xF000F000F000F000F000F000F000F000F000F000F000F000F000F000F000F000) >> 4
            | (digits & 0x0F000F000F000F000F000F000F000F000F000F000F000F000F000F000F000F00) >> 8;
        // Cannot overflow: every byte is a nibble (0..15) here, and stays below 0x67 (see above).
        unchecked {
            digits = bytes32(
                uint256(digits) + 0x3030303030303030303030303030303030303030303030303030303030303030
                    + ((uint256(digits) + 0x0606060606060606060606060606060606060606060606060606060606060606) >> 4
                        & 0x0101010101010101010101010101010101010101010101010101010101010101) * 39
            );
        }
    }
}
