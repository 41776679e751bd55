// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/**
 * @title IFencingRegistry
 * @notice Leases on named resources, each acquisition stamped with a fencing
 * token: a number that only ever goes up across ALL acquisitions of ALL
 * resources of one registry, starting at 1 (0 means "no token").
 *
 * A lease says who may try; the token decides whose writes still count. A
 * downstream resource remembers the highest token it has accepted and refuses
 * lower ones, so a holder that paused past its lease (GC, sleep, a slow call)
 * cannot overwrite the work of the holder that replaced it:
 *
 *     A: acquire -> token 7, lease until t=30
 *     A: ...paused...
 *        t=30: A's lease expires
 *     B: acquire -> token 8, writes with 8          (resource mark: 8)
 *     A: wakes, writes with 7                       -> rejected, 7 < 8
 *
 * @dev Time is chain time (`block.timestamp`, seconds), never a client clock.
 * A lease acquired at time `t` with `ttl` is live for `t <= now < t + ttl`:
 * at `now == expiresAt` it has expired.
 *
 * Resources are `bytes32 resource = keccak256(bytes(name))`. `acquire` takes
 * the name itself so that the chain, not the caller, binds the name to its
 * hash; the name is published once, in {ResourceNamed}, when the resource is
 * first acquired.
 *
 * Names are bytes to the contract: it checks only their length. Anyone can
 * call it directly, so a published name may be invalid UTF-8 or carry control
 * or bidi-override characters; readers must treat names as untrusted bytes
 * (the chainfence SDK decodes them defensively and escapes them for display).
 *
 * Work items ({claimNext}): a named set of items ("workset") handed out one at a
 * time, each item a lease like any other (renew, release, complete, check it
 * with its token) but in a resource space of its own:
 * `resource = keccak256(abi.encode(workset, item))`, a preimage of at least
 * 192 bytes that no name {acquire} accepts (at most 128 bytes) can hash to,
 * so an item cannot be acquired, and no resource can be claimed, by its
 * name. Completing a claimed item ({complete}) ends its lease and marks it
 * done for good: {claimNext} never hands it out again.
 */
interface IFencingRegistry {
    /// @notice Why a resource changed hands, recorded in {LeaseAcquired}.
    enum AcquireReason {
        /// The resource had never been held.
        Unheld,
        /// The previous holder released its lease.
        Released,
        /// The previous lease had expired (whoever held it).
        Expired,
        /// The holder of a live lease acquired again, fencing off its own
        /// earlier incarnation with a new token.
        Reacquired
    }

    /// @notice State of a resource's latest lease, as returned by {leaseOf}.
    enum LeaseStatus {
        /// Never held: holder, token and expiry are all zero.
        Unheld,
        /// Held: `block.timestamp < expiresAt`.
        Live,
        /// The lease ran out: `expiresAt <= block.timestamp`.
        Expired,
        /// The holder released it (`expiresAt` reads 0).
        Released,
        /// A claimed work item whose claimant completed it: never claimed
        /// again (`expiresAt` reads 0, `holder` and `token` are the completer's).
        Done
    }

    // ------------------------------------------------------------------
    // Events: emitted right after the state change they describe. Together
    // with {leaseOf} they are the on-chain record of the holder of every
    // token. `resource`, `token` and `holder` are indexed so audit can filter
    // on any of them.
    // ------------------------------------------------------------------

    /// @notice `name` was acquired for the first time; `resource` is its hash.
    /// Emitted once per resource, just before its first {LeaseAcquired}.
    /// @dev `name` is whatever bytes the first acquirer sent: untrusted.
    event ResourceNamed(bytes32 indexed resource, string name);

    /// @notice `holder` acquired `resource` with fencing `token`, live until
    /// `expiresAt`. `previousToken` is the token it superseded (0 if none) and
    /// `reason` says why the resource was free to take.
    event LeaseAcquired(
        bytes32 indexed resource,
        uint256 indexed token,
        address indexed holder,
        uint256 expiresAt,
        uint256 previousToken,
        AcquireReason reason
    );

    /// @notice `holder` extended its lease on `resource` (same `token`) to `expiresAt`,
    /// reporting `progress`: an opaque 32-byte marker of how far its work has
    /// come ({renewWithProgress}), 0 for a plain {renew} ("nothing to report").
    /// A marker that stays the same across renewals is a holder alive but stuck.
    event LeaseRenewed(
        bytes32 indexed resource, uint256 indexed token, address indexed holder, uint256 expiresAt, bytes32 progress
    );

    /// @notice `holder` released its lease on `resource`; `token` is no longer current.
    event LeaseReleased(bytes32 indexed resource, uint256 indexed token, address indexed holder);

    /// @notice `holder` recorded `resultDigest` as the result of its work under
    /// `token`, while `token` was current: "complete this job only if the epoch
    /// still matches". The lease itself is unchanged, unless it is a claimed
    /// work item: then the item is done and its lease ended (see {complete}).
    event LeaseCompleted(bytes32 indexed resource, uint256 indexed token, address indexed holder, bytes32 resultDigest);

    /// @notice ERC-5267. Never emitted: the EIP-712 domain of a registry is fixed.
    event EIP712DomainChanged();

    // ------------------------------------------------------------------
    // Errors (no revert strings). Each carries what a caller needs to act.
    // ------------------------------------------------------------------

    /// @notice A resource name must be 1 to `maxLength` bytes of UTF-8.
    error FencingRegistryInvalidName(uint256 length, uint256 maxLength);

    /// @notice A ttl must be 1 to `maxTtl` seconds.
    error FencingRegistryInvalidTtl(uint256 ttl, uint256 maxTtl);

    /// @notice Deployment: the maximum ttl must be 1 to 2**32 - 1 seconds.
    error FencingRegistryInvalidMaxTtl(uint256 maxTtl);

    /// @notice Someone else holds a live lease on `resource`: `holder` with
    /// `token` until `expiresAt`. Retry at or after `expiresAt`.
    error FencingRegistryLeaseHeld(bytes32 resource, address holder, uint256 token, uint256 expiresAt);

    /// @notice `token` is below `currentToken`, the latest token of `resource`:
    /// superseded, so whoever holds it lost the lease. (Only the latest token
    /// per resource is stored, so a lower token issued for another resource
    /// reads the same way: either way it does not hold `resource`.)
    error FencingRegistryStaleToken(bytes32 resource, uint256 token, uint256 currentToken);

    /// @notice `token` was never issued for `resource` (0, or above the
    /// resource's `currentToken`): forged, or meant for another resource.
    error FencingRegistryUnknownToken(bytes32 resource, uint256 token, uint256 currentToken);

    /// @notice `account` is not the holder of `token` on `resource`; `holder` is.
    error FencingRegistryNotHolder(bytes32 resource, uint256 token, address account, address holder);

    /// @notice `token` is the resource's latest but its lease expired at `expiredAt`.
    error FencingRegistryLeaseExpired(bytes32 resource, uint256 token, uint256 expiredAt);

    /// @notice `token` is the resource's latest but its holder released it.
    error FencingRegistryLeaseReleased(bytes32 resource, uint256 token);

    /// @notice A token does not fit the 48 bits it is stored in (2**48 - 1:
    /// ~2.8e14 tokens), or an expiry the 40 bits it is stored in (2**40 - 1:
    /// chain times until the year 36,812).
    error FencingRegistryUint48Overflow(uint256 value);

    /// @notice {claimNext} takes 1 to `maxCount` items; `count` were given.
    error FencingRegistryInvalidItems(uint256 count, uint256 maxCount);

    /// @notice {claimNext}: none of the `count` items of the workset whose name
    /// hashes to `workset` is free: each is done or held live by someone else.
    error FencingRegistryNothingToClaim(bytes32 workset, uint256 count);

    // ------------------------------------------------------------------
    // Lease operations
    // ------------------------------------------------------------------

    /**
     * @notice Acquire a lease on `name` for `ttl` seconds and get a new
     * fencing token, strictly greater than every token issued before.
     * @dev Succeeds when the resource is free (never held, released or
     * expired) or when the caller already holds it; in that case the caller
     * gets a NEW token, fencing off its own earlier incarnation. Reverts with
     * {FencingRegistryLeaseHeld} while someone else holds a live lease,
     * {FencingRegistryInvalidName} or {FencingRegistryInvalidTtl} on bad input.
     * Emits {ResourceNamed} on the first acquisition of a resource, then
     * {LeaseAcquired}.
     * @param name The resource name, 1 to {maxNameLength} bytes of UTF-8.
     * @param ttl Lease length in seconds, 1 to {maxTtl}.
     * @return token The fencing token of the new lease.
     * @return expiresAt Chain time at which the lease stops being live.
     */
    function acquire(string calldata name, uint256 ttl) external returns (uint256 token, uint256 expiresAt);

    /**
     * @notice Extend the caller's live lease to `block.timestamp + ttl`.
     * @dev Only the holder, only with the current token, only while live.
     * After expiry a lease cannot be renewed: acquire again for a new token.
     * Reverts with {FencingRegistryStaleToken}, {FencingRegistryUnknownToken},
     * {FencingRegistryNotHolder}, {FencingRegistryLeaseReleased},
     * {FencingRegistryLeaseExpired} or {FencingRegistryInvalidTtl}.
     * Emits {LeaseRenewed}.
     * @return expiresAt The new expiry.
     */
    function renew(bytes32 resource, uint256 token, uint256 ttl) external returns (uint256 expiresAt);

    /**
     * @notice {renew}, reporting `progress` (a 32-byte marker of how far the
     * work has come: a counter, a hash of the last output) in {LeaseRenewed}.
     * @dev A heartbeat is not proof of progress: a watchdog reading the
     * markers tells a holder that renews but no longer advances. Stores
     * nothing: it costs {renew} plus 32 bytes of calldata and 32 of log data.
     * A function of its own, not an overload of {renew}: one name, one
     * signature, for every ABI client. Reverts like {renew}.
     * @param progress Any 32 bytes; 0 reads as "nothing to report".
     * @return expiresAt The new expiry.
     */
    function renewWithProgress(bytes32 resource, uint256 token, uint256 ttl, bytes32 progress)
        external
        returns (uint256 expiresAt);

    /**
     * @notice End the caller's live lease now.
     * @dev Only the holder, only with the current token, only while live: a
     * release with an old token never frees a newer lease. Reverts like
     * {renew}. Emits {LeaseReleased}.
     */
    function release(bytes32 resource, uint256 token) external;

    /**
     * @notice Record `resultDigest` as the result of the work done under
     * `token`: succeeds only for the holder, with the current token, while
     * the lease is live, so a holder that lost its lease cannot complete.
     * For a work item taken with {claimNext}, it also ends the lease and marks
     * the item done: {claimNext} never hands it out again, and a second
     * completion (by anyone, with any token) is refused.
     * @dev Reverts like {renew}. Emits {LeaseCompleted}. Writes no storage,
     * except for a claimed item: one write to its slot (nonzero -> nonzero).
     */
    function complete(bytes32 resource, uint256 token, bytes32 resultDigest) external;

    /**
     * @notice Claim the first item of `items` (the items of the set of work
     * named `workset`, in the order given) that is free and not done, in one
     * transaction: a lease on it for `ttl` seconds, with a new fencing token.
     * @dev An item is free when it was never claimed, its claim was released
     * or expired (no janitor: an expired claim is simply free again), or the
     * caller itself holds it live: an agent restarted with no memory claims
     * live and gets its own item back under a NEW token, fencing off its
     * earlier incarnation. Items held live by others and done items are
     * skipped. Item `i`'s resource is `keccak256(abi.encode(workset, items[i]))`
     * (see the contract's header). Emits {ResourceNamed} (with name
     * `workset + "/" + item`, for display only) on an item's first claim,
     * then {LeaseAcquired}. Reverts with {FencingRegistryNothingToClaim} when
     * no item is free, {FencingRegistryInvalidName} (workset or item),
     * {FencingRegistryInvalidItems} or {FencingRegistryInvalidTtl} on bad input.
     * Gas grows with the items scanned (a hash and a cold storage read each):
     * list the items most likely free first.
     * @param workset The set's name, 1 to {maxNameLength} bytes.
     * @param items 1 to 512 item names, each 1 to {maxNameLength} bytes.
     * @return index The position in `items` of the item claimed.
     * @return resource Its resource id.
     * @return token The fencing token of the new lease.
     * @return expiresAt Chain time at which the claim stops being live.
     */
    function claimNext(string memory workset, string[] memory items, uint256 ttl)
        external
        returns (uint256 index, bytes32 resource, uint256 token, uint256 expiresAt);

    // ------------------------------------------------------------------
    // Views
    // ------------------------------------------------------------------

    /// @notice The latest lease of `resource`, whatever its state, judged at
    /// this block's timestamp. A released lease reads `expiresAt == 0`.
    function leaseOf(bytes32 resource)
        external
        view
        returns (address holder, uint256 token, uint256 expiresAt, LeaseStatus status);

    /// @notice Whether `token` is the current token of `resource` and its
    /// lease is live (not expired, not released).
    function isCurrent(bytes32 resource, uint256 token) external view returns (bool);

    /**
     * @notice Revert unless `token` is current for `resource`; for contracts
     * to call before a fenced write.
     * @dev Reverts with {FencingRegistryUnknownToken},
     * {FencingRegistryStaleToken}, {FencingRegistryLeaseReleased} or
     * {FencingRegistryLeaseExpired}.
     * @return holder The lease holder (compare with the caller you serve).
     * @return expiresAt The lease's expiry.
     */
    function checkCurrent(bytes32 resource, uint256 token) external view returns (address holder, uint256 expiresAt);

    /// @notice The highest token issued so far (0 before the first acquisition).
    function latestToken() external view returns (uint256);

    /// @notice The longest ttl a lease may ask for, fixed at deployment.
    function maxTtl() external view returns (uint256);

    /// @notice The longest resource name, in bytes.
    function maxNameLength() external pure returns (uint256);


    /// @notice The block this registry was deployed in. Readers start their
    /// event queries there, and bind state they keep about the registry to
    /// that block's hash (which a wiped or rebuilt dev chain does not keep).
    function deploymentBlock() external view returns (uint256);

    /**
     * @notice ERC-5267: the EIP-712 domain holders sign fenced requests in
     * (name "FencingRegistry", version "2", this chain, this registry), so a
     * request signed for one registry or chain is worthless on another.
     * Version 2: requests are bound to an action and an audience.
     */
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
        );
}
