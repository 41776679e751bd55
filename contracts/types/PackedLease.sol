// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IFencingRegistry} from "../IFencingRegistry.sol";

/**
 * @dev The latest lease of a resource, one storage slot (`FencingRegistry._leases`):
 *
 *   bits   0..159  holder     the address that holds (or last held) it
 *   bits 160..199  expiresAt  chain time the lease ends; 0 once ended (released, revoked, done)
 *   bit  200       claimed    a work item taken with {claimNext} (LEASE_CLAIMED)
 *   bit  201       done       a claimed item its claimant completed (LEASE_DONE)
 *   bit  202       revoked    its namespace's admin revoked it (LEASE_REVOKED)
 *   bit  203       recorded   the resource's namespace is recorded: renewals read its maxTtl (LEASE_RECORDED)
 *   bits 204..207  (zero)
 *   bits 208..255  token      its fencing token; 0 if never held
 *
 * A value type over uint256 rather than a struct: the struct version spends ~300 more gas per call
 * copying fields through memory. Every accessor is an internal pure function: inlined, no call.
 */
type PackedLease is uint256;

using PackedLeaseLibrary for PackedLease global;

/// @dev The latest expiry a lease can hold (40 bits: chain times until the year 36,812).
uint256 constant MAX_EXPIRES_AT = (1 << 40) - 1;
/// @dev The highest token a lease can hold (48 bits: ~2.8e14 tokens).
uint256 constant MAX_TOKEN = (1 << 48) - 1;

/// @dev A work item taken with {claimNext}: {complete} marks it done.
uint256 constant LEASE_CLAIMED = 1 << 200;
/// @dev The work item was completed: {claimNext} never hands it out again.
uint256 constant LEASE_DONE = 1 << 201;
/// @dev The namespace's admin revoked the lease ({revoke}).
uint256 constant LEASE_REVOKED = 1 << 202;
/// @dev The resource's namespace is recorded (`FencingRegistry._namespaceOf`): renewals read its maxTtl.
/// Kept by every write of the slot.
uint256 constant LEASE_RECORDED = 1 << 203;

library PackedLeaseLibrary {
    uint256 private constant _EXPIRES_AT_SHIFT = 160;
    uint256 private constant _TOKEN_SHIFT = 208;
    uint256 private constant _HOLDER_MASK = (1 << 160) - 1;
    /// @dev Every bit but the expiry's (flags kept).
    uint256 private constant _CLEAR_EXPIRES_AT = ~(MAX_EXPIRES_AT << _EXPIRES_AT_SHIFT);

    /// @dev A lease of `holder_` with `token_` until `expiresAt_` (bounded by its caller: see
    /// `FencingRegistry._expiry`), no flags. The token is checked: it reverts rather than truncate.
    function pack(address holder_, uint256 expiresAt_, uint256 token_) internal pure returns (PackedLease) {
        if (token_ > MAX_TOKEN) revert IFencingRegistry.FencingRegistryUint48Overflow(token_);
        return PackedLease.wrap(
            uint256(uint160(holder_)) | (expiresAt_ << _EXPIRES_AT_SHIFT) | (token_ << _TOKEN_SHIFT)
        );
    }

    /// @dev {pack} for a token its caller checked (`token_ <= MAX_TOKEN`): {claimNext} checks it before
    /// writing the counter, and a second check there cost each claim 70 gas (the optimizer kept both).
    function packChecked(address holder_, uint256 expiresAt_, uint256 token_) internal pure returns (PackedLease) {
        return PackedLease.wrap(
            uint256(uint160(holder_)) | (expiresAt_ << _EXPIRES_AT_SHIFT) | (token_ << _TOKEN_SHIFT)
        );
    }

    function holder(PackedLease lease) internal pure returns (address) {
        return address(uint160(PackedLease.unwrap(lease) & _HOLDER_MASK));
    }

    /// @dev 0 once the lease ended (released, revoked, done); compare with `block.timestamp` for expiry.
    function expiresAt(PackedLease lease) internal pure returns (uint256) {
        return (PackedLease.unwrap(lease) >> _EXPIRES_AT_SHIFT) & MAX_EXPIRES_AT;
    }

    /// @dev 0: never held.
    function token(PackedLease lease) internal pure returns (uint256) {
        return PackedLease.unwrap(lease) >> _TOKEN_SHIFT;
    }

    /// @dev Whether the flag `flag` (one of LEASE_CLAIMED, LEASE_DONE, LEASE_REVOKED, LEASE_RECORDED) is set.
    function has(PackedLease lease, uint256 flag) internal pure returns (bool) {
        return PackedLease.unwrap(lease) & flag != 0;
    }

    /// @dev The bits of `flags` the lease carries (0 if none): to keep them in a new slot ({withFlags}).
    function flags(PackedLease lease, uint256 flags_) internal pure returns (uint256) {
        return PackedLease.unwrap(lease) & flags_;
    }

    /// @dev The lease with `flags_` set as well.
    function withFlags(PackedLease lease, uint256 flags_) internal pure returns (PackedLease) {
        return PackedLease.wrap(PackedLease.unwrap(lease) | flags_);
    }

    /// @dev The same lease (holder, token, flags) until `expiresAt_` (a renewal; bounded by its caller).
    function withExpiresAt(PackedLease lease, uint256 expiresAt_) internal pure returns (PackedLease) {
        return PackedLease.wrap((PackedLease.unwrap(lease) & _CLEAR_EXPIRES_AT) | (expiresAt_ << _EXPIRES_AT_SHIFT));
    }

    /// @dev The lease ended now (expiry 0), holder, token and flags kept: the slot stays nonzero (a cheap
    /// next acquisition) and an old token still reads as stale, never as unknown.
    function ended(PackedLease lease) internal pure returns (PackedLease) {
        return PackedLease.wrap(PackedLease.unwrap(lease) & _CLEAR_EXPIRES_AT);
    }
}
