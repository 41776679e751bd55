// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IFencingRegistry} from "./IFencingRegistry.sol";

/**
 * @title FencingRegistry
 * @notice Issues globally monotonic fencing tokens for leases on named
 * resources. See {IFencingRegistry} for the semantics.
 *
 * @dev Note: design decisions.
 * - One storage slot per resource, packed (see `_leases`), never deleted: a
 *   release zeroes only the expiry, so the next acquisition pays a
 *   nonzero -> nonzero write (2,900 gas) instead of zero -> nonzero (20,000).
 * - History lives in events, not in per-token storage: a `token => holder`
 *   mapping would cost 22,100 gas per acquisition and answer nothing the
 *   indexed {LeaseAcquired} log does not.
 * - Tokens are stored in 48 bits (as OpenZeppelin's `Time` does for
 *   timepoints), expiries in 40 (chain times until the year 36,812), widened
 *   to uint256 in the ABI. Narrowing is checked: it reverts rather than
 *   truncates. The 8 bits the expiry gave up hold the work-item flags, so a
 *   claimed item still costs one slot and acquire/renew/release still read
 *   and write exactly what they did.
 * - Work items ({claimNext}) live in the same mapping as leases, under ids no
 *   acquirable name hashes to (`keccak256(abi.encode(workset, item))`, 192+
 *   bytes hashed; names are at most 128), so renew, release, complete,
 *   checkCurrent and leaseOf serve them unchanged. "Done" is a flag in the
 *   item's slot, set by {complete} when the slot carries the "claimed" flag:
 *   a done item can never be claimed again (claim skips it, and no acquire
 *   can reach it). Alternatives rejected: a `done` mapping (a second cold
 *   slot per item: +22,100 gas per completion and +2,100 per item scanned),
 *   or done-ness in events only (claim would need the log it cannot read).
 * - {claimNext} takes its names as `memory`, not `calldata`: sharing the
 *   calldata string decoder with {acquire} made every acquisition 41 gas
 *   dearer. Its gas grows with the items it skips (a hash and a cold read
 *   each), bounded by 512 items a call.
 * - Progress markers ({renewWithProgress}) live in {LeaseRenewed} only: a
 *   watchdog reads them from the log; storing them would cost a slot write
 *   per renewal.
 * - No owner, no admin, no upgrade path: nobody can mint a token, move a
 *   lease or rewrite history. The only parameter, {maxTtl}, is immutable.
 * - No external calls, so no reentrancy surface.
 */
contract FencingRegistry is IFencingRegistry {
    // ------------------------------------------------------------------
    // Storage
    // ------------------------------------------------------------------

    /*
     * The latest lease of each resource is one packed uint256 slot:
     *
     *   bits   0..159  holder     the address that acquired it (msg.sender)
     *   bits 160..199  expiresAt  chain time the lease ends; 0 once released
     *   bit  200       claimed    a work item taken with {claimNext}
     *   bit  201       done       a claimed item its claimant completed
     *   bits 202..207  (zero)
     *   bits 208..255  token      its fencing token; 0 if never held
     *
     * A plain uint256 with shifts rather than a struct: the struct version
     * spends ~300 more gas per call copying fields through memory.
     */
    mapping(bytes32 resource => uint256 packedLease) private _leases;

    /// @dev The highest token issued; the next one is `_latestToken + 1`.
    uint256 private _latestToken;

    uint256 private immutable _maxTtl;

    /// @dev `block.number` at construction (see {deploymentBlock}).
    uint256 private immutable _deploymentBlock;

    uint256 private constant _EXPIRES_AT_SHIFT = 160;
    uint256 private constant _TOKEN_SHIFT = 208;
    uint256 private constant _UINT48_MASK = (1 << 48) - 1;
    uint256 private constant _UINT40_MASK = (1 << 40) - 1;
    uint256 private constant _HOLDER_MASK = (1 << 160) - 1;
    /// @dev Every bit but the expiry's (flags kept): `packed & _CLEAR_EXPIRES_AT` marks a lease released.
    uint256 private constant _CLEAR_EXPIRES_AT = ~(_UINT40_MASK << _EXPIRES_AT_SHIFT);
    /// @dev The slot is a work item taken with {claimNext}: {complete} marks it done.
    uint256 private constant _CLAIMED = 1 << 200;
    /// @dev The work item was completed: {claimNext} never hands it out again.
    uint256 private constant _DONE = 1 << 201;

    /// @dev Most items one {claimNext} may list: bounds its gas (a cold read and a hash per item scanned).
    uint256 private constant _MAX_CLAIM_ITEMS = 512;

    /// @dev Longest resource name in bytes. Names are calldata on every
    /// acquisition (16 gas a byte), so they are kept short.
    uint256 private constant _MAX_NAME_LENGTH = 128;

    /// @dev Upper bound for {maxTtl}: keeps `block.timestamp + ttl` far below 2**48.
    uint256 private constant _MAX_MAX_TTL = type(uint32).max;

    /// @param maxTtl_ The longest ttl a lease may ask for, 1 to 2**32 - 1 seconds.
    constructor(uint256 maxTtl_) {
        if (maxTtl_ == 0 || maxTtl_ > _MAX_MAX_TTL) revert FencingRegistryInvalidMaxTtl(maxTtl_);
        _maxTtl = maxTtl_;
        _deploymentBlock = block.number;
    }

    // ------------------------------------------------------------------
    // Lease operations
    // ------------------------------------------------------------------

    /// @inheritdoc IFencingRegistry
    function acquire(string calldata name, uint256 ttl) external returns (uint256 token, uint256 expiresAt) {
        uint256 length = bytes(name).length;
        if (length == 0 || length > _MAX_NAME_LENGTH) revert FencingRegistryInvalidName(length, _MAX_NAME_LENGTH);
        expiresAt = _expiry(ttl);

        bytes32 resource = keccak256(bytes(name));
        uint256 previous = _leases[resource];
        uint256 previousToken = _tokenOf(previous);
        uint256 previousExpiresAt = _expiresAtOf(previous);

        AcquireReason reason;
        if (previousToken == 0) {
            reason = AcquireReason.Unheld;
        } else if (previousExpiresAt == 0) {
            reason = AcquireReason.Released;
        } else if (previousExpiresAt <= block.timestamp) {
            reason = AcquireReason.Expired;
        } else if (_holderOf(previous) == msg.sender) {
            // The holder asks again: a new token fences off its own past self
            // (an agent that restarted must not share an epoch with it).
            reason = AcquireReason.Reacquired;
        } else {
            revert FencingRegistryLeaseHeld(resource, _holderOf(previous), previousToken, previousExpiresAt);
        }

        // Cannot overflow: _latestToken was checked to fit 48 bits when stored (in _pack).
        // The narrowing check in _pack keeps the new token from wrapping into the flag bits.
        unchecked {
            token = _latestToken + 1;
        }
        _latestToken = token;
        _leases[resource] = _pack(msg.sender, expiresAt, token);

        if (reason == AcquireReason.Unheld) emit ResourceNamed(resource, name);
        emit LeaseAcquired(resource, token, msg.sender, expiresAt, previousToken, reason);
    }

    /// @inheritdoc IFencingRegistry
    function renew(bytes32 resource, uint256 token, uint256 ttl) external returns (uint256 expiresAt) {
        expiresAt = _expiry(ttl);
        uint256 lease = _requireHolder(resource, token);
        // Same holder, same token, same flags: only the expiry bits change.
        _leases[resource] = (lease & _CLEAR_EXPIRES_AT) | (expiresAt << _EXPIRES_AT_SHIFT);
        emit LeaseRenewed(resource, token, msg.sender, expiresAt, bytes32(0));
    }

    /// @inheritdoc IFencingRegistry
    function renewWithProgress(bytes32 resource, uint256 token, uint256 ttl, bytes32 progress)
        external
        returns (uint256 expiresAt)
    {
        expiresAt = _expiry(ttl);
        uint256 lease = _requireHolder(resource, token);
        _leases[resource] = (lease & _CLEAR_EXPIRES_AT) | (expiresAt << _EXPIRES_AT_SHIFT);
        emit LeaseRenewed(resource, token, msg.sender, expiresAt, progress);
    }

    /// @inheritdoc IFencingRegistry
    function release(bytes32 resource, uint256 token) external {
        uint256 lease = _requireHolder(resource, token);
        // Keep holder and token: the slot stays nonzero (cheap re-acquisition)
        // and an old token still reads as stale, never as unknown.
        _leases[resource] = lease & _CLEAR_EXPIRES_AT;
        emit LeaseReleased(resource, token, msg.sender);
    }

    /// @inheritdoc IFencingRegistry
    function complete(bytes32 resource, uint256 token, bytes32 resultDigest) external {
        uint256 lease = _requireHolder(resource, token);
        if (lease & _CLAIMED != 0) {
            // A claimed work item: done for good, its lease ended (holder and token kept, so the
            // completer's token reads as its last and any older one as stale).
            _leases[resource] = (lease & _CLEAR_EXPIRES_AT) | _DONE;
        }
        emit LeaseCompleted(resource, token, msg.sender, resultDigest);
    }

    /// @inheritdoc IFencingRegistry
    function claimNext(string memory workset, string[] memory items, uint256 ttl)
        external
        returns (uint256 index, bytes32 resource, uint256 token, uint256 expiresAt)
    {
        _requireName(workset);
        uint256 count = items.length;
        if (count == 0 || count > _MAX_CLAIM_ITEMS) revert FencingRegistryInvalidItems(count, _MAX_CLAIM_ITEMS);
        for (uint256 i; i < count; ++i) {
            _requireName(items[i]); // all of them: bad input anywhere reverts, wherever the free item is
        }
        if (ttl == 0 || ttl > _maxTtl) revert FencingRegistryInvalidTtl(ttl, _maxTtl);
        // Cannot overflow: ttl <= 2**32 - 1 and block.timestamp < 2**64 in any EVM.
        unchecked {
            expiresAt = block.timestamp + ttl;
        }
        if (expiresAt > _UINT40_MASK) revert FencingRegistryUint48Overflow(expiresAt);

        for (; index < count; ++index) {
            resource = keccak256(abi.encode(workset, items[index]));
            uint256 previous = _leases[resource];
            if (previous & _DONE != 0) continue;
            uint256 previousToken = _tokenOf(previous);
            uint256 previousExpiresAt = _expiresAtOf(previous);

            AcquireReason reason;
            if (previousToken == 0) {
                reason = AcquireReason.Unheld;
            } else if (previousExpiresAt == 0) {
                reason = AcquireReason.Released;
            } else if (previousExpiresAt <= block.timestamp) {
                reason = AcquireReason.Expired; // a crashed claimant's item: free again, no janitor
            } else if (_holderOf(previous) == msg.sender) {
                reason = AcquireReason.Reacquired; // a restarted claimant gets its item back, fenced
            } else {
                continue; // held live by another claimant
            }

            // Cannot overflow: every stored token passed the 48-bit check below (or {_pack}'s).
            unchecked {
                token = _latestToken + 1;
            }
            if (token > _UINT48_MASK) revert FencingRegistryUint48Overflow(token);
            _latestToken = token;
            _leases[resource] =
                uint256(uint160(msg.sender)) | (expiresAt << _EXPIRES_AT_SHIFT) | _CLAIMED | (token << _TOKEN_SHIFT);

            if (reason == AcquireReason.Unheld) {
                emit ResourceNamed(resource, string.concat(workset, "/", items[index]));
            }
            // emit LeaseAcquired(resource, token, msg.sender, expiresAt, previousToken, reason), by hand:
            // the compiler would share one event encoder with {acquire} and make acquisitions dearer.
            bytes32 topic = LeaseAcquired.selector;
            assembly ("memory-safe") {
                let data := mload(0x40)
                mstore(data, expiresAt)
                mstore(add(data, 0x20), previousToken)
                mstore(add(data, 0x40), reason)
                log4(data, 0x60, topic, resource, token, caller())
            }
            return (index, resource, token, expiresAt);
        }
        revert FencingRegistryNothingToClaim(keccak256(bytes(workset)), count);
    }

    // ------------------------------------------------------------------
    // Views
    // ------------------------------------------------------------------

    /// @inheritdoc IFencingRegistry
    function leaseOf(bytes32 resource)
        external
        view
        returns (address holder, uint256 token, uint256 expiresAt, LeaseStatus status)
    {
        uint256 lease = _leases[resource];
        holder = _holderOf(lease);
        token = _tokenOf(lease);
        expiresAt = _expiresAtOf(lease);
        if (token == 0) status = LeaseStatus.Unheld;
        else if (lease & _DONE != 0) status = LeaseStatus.Done;
        else if (expiresAt == 0) status = LeaseStatus.Released;
        else if (expiresAt <= block.timestamp) status = LeaseStatus.Expired;
        else status = LeaseStatus.Live;
    }

    /// @inheritdoc IFencingRegistry
    function isCurrent(bytes32 resource, uint256 token) external view returns (bool) {
        uint256 lease = _leases[resource];
        // A released lease has expiresAt == 0, so the time test covers it.
        return token != 0 && token == _tokenOf(lease) && block.timestamp < _expiresAtOf(lease);
    }

    /// @inheritdoc IFencingRegistry
    function checkCurrent(bytes32 resource, uint256 token) external view returns (address holder, uint256 expiresAt) {
        uint256 lease = _requireCurrentToken(resource, token);
        _requireLive(resource, token, lease);
        return (_holderOf(lease), _expiresAtOf(lease));
    }

    /// @inheritdoc IFencingRegistry
    function latestToken() external view returns (uint256) {
        return _latestToken;
    }

    /// @inheritdoc IFencingRegistry
    function maxTtl() external view returns (uint256) {
        return _maxTtl;
    }

    /// @inheritdoc IFencingRegistry
    function maxNameLength() external pure returns (uint256) {
        return _MAX_NAME_LENGTH;
    }


    /// @inheritdoc IFencingRegistry
    function deploymentBlock() external view returns (uint256) {
        return _deploymentBlock;
    }

    /// @inheritdoc IFencingRegistry
    function eip712Domain()
        external
        view
        returns (
            bytes1 fields,
            string memory name,
            string memory version,
            uint256 chainId,
            address verifyingContract,
            bytes32 salt,
            uint256[] memory extensions
        )
    {
        // 0x0f: name, version, chainId and verifyingContract are set; no salt, no extensions.
        return (hex"0f", "FencingRegistry", "2", block.chainid, address(this), bytes32(0), new uint256[](0));
    }

    // ------------------------------------------------------------------
    // Internal
    // ------------------------------------------------------------------

    /// @dev Revert unless `name` is 1 to {maxNameLength} bytes.
    function _requireName(string memory name) private pure {
        uint256 length = bytes(name).length;
        if (length == 0 || length > _MAX_NAME_LENGTH) revert FencingRegistryInvalidName(length, _MAX_NAME_LENGTH);
    }

    /// @dev `block.timestamp + ttl` after checking 1 <= ttl <= maxTtl; reverts
    /// rather than let an expiry wider than 40 bits spill into the flag bits.
    function _expiry(uint256 ttl) private view returns (uint256 expiresAt) {
        if (ttl == 0 || ttl > _maxTtl) revert FencingRegistryInvalidTtl(ttl, _maxTtl);
        // Cannot overflow: ttl <= 2**32 - 1 and block.timestamp < 2**64 in any EVM.
        unchecked {
            expiresAt = block.timestamp + ttl;
        }
        if (expiresAt > _UINT40_MASK) revert FencingRegistryUint48Overflow(expiresAt);
    }

    /// @dev The packed lease of `resource`, after checking that `token` is
    /// its current token, that the caller holds it and that it is live.
    function _requireHolder(bytes32 resource, uint256 token) private view returns (uint256 lease) {
        lease = _requireCurrentToken(resource, token);
        address holder = _holderOf(lease);
        if (holder != msg.sender) revert FencingRegistryNotHolder(resource, token, msg.sender, holder);
        _requireLive(resource, token, lease);
    }

    /// @dev The packed lease of `resource`, after checking that `token` is its latest token.
    function _requireCurrentToken(bytes32 resource, uint256 token) private view returns (uint256 lease) {
        lease = _leases[resource];
        uint256 current = _tokenOf(lease);
        if (token != current || token == 0) {
            if (token == 0 || token > current) revert FencingRegistryUnknownToken(resource, token, current);
            revert FencingRegistryStaleToken(resource, token, current);
        }
    }

    /// @dev Revert unless `lease` (whose token is `token`) is live now.
    function _requireLive(bytes32 resource, uint256 token, uint256 lease) private view {
        uint256 expiresAt = _expiresAtOf(lease);
        if (expiresAt == 0) revert FencingRegistryLeaseReleased(resource, token);
        if (expiresAt <= block.timestamp) revert FencingRegistryLeaseExpired(resource, token, expiresAt);
    }

    /// @dev One packed slot. `expiresAt` comes from {_expiry}, which bounds it;
    /// the token is checked here: it reverts rather than truncate.
    function _pack(address holder, uint256 expiresAt, uint256 token) private pure returns (uint256) {
        if (token > _UINT48_MASK) revert FencingRegistryUint48Overflow(token);
        return uint256(uint160(holder)) | (expiresAt << _EXPIRES_AT_SHIFT) | (token << _TOKEN_SHIFT);
    }

    function _holderOf(uint256 lease) private pure returns (address) {
        return address(uint160(lease & _HOLDER_MASK));
    }

    function _expiresAtOf(uint256 lease) private pure returns (uint256) {
        return (lease >> _EXPIRES_AT_SHIFT) & _UINT40_MASK;
    }

    function _tokenOf(uint256 lease) private pure returns (uint256) {
        return lease >> _TOKEN_SHIFT;
    }
}
