// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IFencingRegistry} from "../IFencingRegistry.sol";

/**
 * @title FencedStore
 * @notice Example downstream contract: a key-value store whose writes are
 * fenced by a {IFencingRegistry}. Key `k` is guarded by the lease on resource
 * `k` (a resource id, `keccak256(name)`). A write succeeds only for the
 * holder of that lease, with its current token, and never with a token lower
 * than one this store has already accepted for the key.
 *
 *     A: acquire "reports/daily" -> token 7;  write(key, 7, x)    ok, fence 7
 *     A: ...paused past its lease...
 *     B: acquire "reports/daily" -> token 8;  write(key, 8, y)    ok, fence 8
 *     A: write(key, 7, z)                                         reverts: token 7 is stale
 *
 * @dev Two checks, on purpose: the registry's `checkCurrent` (the lease is
 * live and the caller holds it) and this store's own per-key high-water mark
 * (so even a registry answer that went backwards could not lower a fence).
 * Registry reverts bubble up unchanged, so clients decode them as the
 * registry's own errors.
 */
contract FencedStore {
    IFencingRegistry public immutable registry;

    struct Entry {
        bytes32 value;
        uint256 fence;
    }

    mapping(bytes32 key => Entry) private _entries;

    /// @notice `account` presented a current token but does not hold it; `holder` does.
    error FencedStoreNotHolder(bytes32 resource, uint256 token, address account, address holder);

    /// @notice `token` is below the highest token this store accepted for the key.
    error FencedStoreStaleToken(bytes32 resource, uint256 token, uint256 currentToken);

    /// @notice `writer` wrote `value` under `token`.
    event Written(bytes32 indexed key, uint256 indexed token, address indexed writer, bytes32 value);

    constructor(IFencingRegistry registry_) {
        registry = registry_;
    }

    /// @notice Write `value` under key `key` (a resource id) with fencing token `token`.
    function write(bytes32 key, uint256 token, bytes32 value) external {
        // Reverts unless `token` is the live token of resource `key`.
        (address holder,) = registry.checkCurrent(key, token);
        if (holder != msg.sender) revert FencedStoreNotHolder(key, token, msg.sender, holder);
        Entry storage entry = _entries[key];
        if (token < entry.fence) revert FencedStoreStaleToken(key, token, entry.fence);
        entry.fence = token;
        entry.value = value;
        emit Written(key, token, msg.sender, value);
    }

    /// @notice The value stored under `key` and the token that wrote it (0 if never written).
    function read(bytes32 key) external view returns (bytes32 value, uint256 fence) {
        Entry storage entry = _entries[key];
        return (entry.value, entry.fence);
    }
}
