// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @dev {IFencingRegistry.setNamespacePolicy}'s `fields`: set the maximum ttl ...
uint256 constant POLICY_MAX_TTL = 1;
/// @dev ... the lock-delay ...
uint256 constant POLICY_LOCK_DELAY = 2;
/// @dev ... whether holders must be admitted.
uint256 constant POLICY_ADMISSION = 4;

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
 * first acquired. A {ResourceNamed}'s `name` always hashes to its `resource`:
 * it names nothing else (work items are named by {ItemNamed}).
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
 * name. An item is published by {ItemNamed}, its workset and item apart, never
 * by {ResourceNamed}: item `db` of workset `prod` (which anyone may claim: a
 * name without `/` is in no namespace) is not the resource `prod/db` and is
 * never logged as a name that reads like it, so a reader of the raw logs (an
 * explorer, `cast`, any indexer) cannot take its claimant for a holder in
 * namespace `prod`. Completing a claimed item ({complete}) ends its lease and
 * marks it done for good: {claimNext} never hands it out again.
 *
 * Namespaces: a name's namespace is its bytes before its first `/`
 * (`prod/db` is in namespace `prod`), identified by
 * `namespace = keccak256(bytes(prefix))`. A name without `/` is in no namespace
 * and always open. Claimed work items follow their workset name's namespace.
 * A namespace has an admin in exactly one of two ways, both fixed before any
 * lease in it can exist, so nobody ever gains power over leases taken or names
 * used before that power existed:
 * - an ADDRESS NAMESPACE, whose prefix is "0x" and the 40 lowercase hex digits
 *   of an address (`0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed/jobs`), belongs
 *   to that address from the start: no claim, and no storage until it sets a
 *   policy. Anyone may use names in it; its owner governs them, as the name
 *   says. A prefix of 42 bytes starting "0x" that is not lowercase hex has no
 *   admin, ever (open, like any unassigned namespace);
 * - any other namespace has an admin only if the deployer assigned it in the
 *   constructor (nothing can be mined before it). There is no claim of an
 *   unassigned namespace: it stays open, exactly as before namespaces existed.
 * The admin hands the role over in two steps ({transferNamespaceAdmin}, then
 * {acceptNamespaceAdmin} by the new admin), policy and allowlist unchanged;
 * the old admin (an address namespace's own address included) then has no
 * power left. There is no renounce and no global owner: an admin acts only in
 * its own namespace. The admin sets its policy ({setNamespacePolicy}: an
 * allowlist requirement, a maximum ttl, a lock-delay, each field on its own;
 * {setAdmission} for the allowlist), ends a live lease ({revoke},
 * {revokeItem}) and issues one to a holder it names ({grant}, {grantItem}).
 * Every path that moves a lease issues a new, higher token and records why
 * ({AcquireReason}) and who ({LeaseRevoked}, {LeaseGranted}). An admin
 * cannot touch another namespace or a name without `/`, reuse or lower a
 * token, or change history. A policy never evicts a live holder by itself:
 * only {revoke} or {grant} do, and both are logged.
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
        Reacquired,
        /// The namespace's admin had revoked the previous lease ({revoke}).
        Revoked,
        /// The namespace's admin granted this lease ({grant}); a live
        /// previous lease was revoked first ({LeaseRevoked}).
        Granted
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
        Done,
        /// The namespace's admin revoked it (`expiresAt` reads 0, `holder`
        /// and `token` are the revoked lease's).
        Revoked
    }

    /// @notice What one operation of a {batchCalls} does: the lone call it stands for.
    enum BatchKind {
        /// {acquire} `name` for `ttl` seconds.
        Acquire,
        /// {acquireExclusive} `name` for `ttl` seconds.
        AcquireExclusive,
        /// {renew} `resource` with `token` for `ttl` seconds.
        Renew,
        /// {release} `resource` with `token`.
        Release
    }

    /// @notice One operation of a {batchCalls}: its kind and the arguments of the lone call it stands for
    /// (`name` and `ttl` for an acquisition; `resource`, `token` and, for a renewal, `ttl` for the
    /// others). Fields the kind does not use are ignored: pass 0 and "".
    struct BatchOp {
        BatchKind kind;
        string name;
        bytes32 resource;
        uint256 token;
        uint256 ttl;
    }

    /// @notice What a signed intent ({performIntents}) asks for: the lone call its signer would make.
    enum IntentKind {
        /// {acquire} `name` for `ttl` seconds, while the resource's latest token is `guard`.
        Acquire,
        /// {acquireExclusive} `name` for `ttl` seconds, while the resource's latest token is `guard`.
        AcquireExclusive,
        /// {renewWithProgress} `resource` with `token` for `ttl` seconds (`data`: the progress marker),
        /// while the lease's expiry is `guard` and the renewal moves it later.
        Renew,
        /// {release} `resource` with `token`.
        Release,
        /// {complete} `resource` with `token` (`data`: the result digest), spending nonce `guard`.
        Complete,
        /// {claimNext} an item of the workset `name` among `items` for `ttl` seconds, spending nonce `guard`.
        Claim
    }

    /**
     * @notice One signed intent of a {performIntents}: a lease operation `holder` signed (EIP-712, this
     * registry's domain) for anyone to submit. Fields its kind does not use are ignored: pass 0, ""
     * and []. What is signed is the kind's own EIP-712 type, its fields named as the lone call names
     * them (see {performIntents}); `signature` is not part of it.
     */
    struct Intent {
        IntentKind kind;
        /// The signer: the lease's holder and the actor of the operation, as if it had sent the lone call.
        address holder;
        /// Acquire, AcquireExclusive: the resource's name. Claim: the workset's name.
        string name;
        /// Claim: the items, in the order {claimNext} tries them.
        string[] items;
        /// Renew, Release, Complete: the lease's resource id.
        bytes32 resource;
        /// Renew, Release, Complete: the lease's token.
        uint256 token;
        /// Acquire, AcquireExclusive, Renew, Claim: the ttl, in seconds.
        uint256 ttl;
        /// Renew: the progress marker (0: none). Complete: the result digest.
        bytes32 data;
        /// The replay guard. Acquire, AcquireExclusive: the resource's latest token when signed (0: never
        /// held). Renew: the lease's expiry when signed. Complete, Claim: a nonce of the holder's (one bit
        /// of {usedNonceBits}). Release: unused (its token is its guard).
        uint256 guard;
        /// The last chain time (`block.timestamp`) the intent may land at.
        uint256 deadline;
        /// `holder`'s signature of the intent's EIP-712 digest: 65 bytes (r, s, v; low s) from an
        /// account's key, or whatever `holder`'s ERC-1271 `isValidSignature` accepts for a contract.
        bytes signature;
    }

    // ------------------------------------------------------------------
    // Events: emitted right after the state change they describe. Together
    // with {leaseOf} they are the on-chain record of the holder of every
    // token. `resource`, `token` and `holder` are indexed so audit can filter
    // on any of them.
    // ------------------------------------------------------------------

    /// @notice `name` was acquired for the first time; `resource` is its hash, `keccak256(bytes(name))`.
    /// Emitted once per resource, just before its first {LeaseAcquired}. Only for a resource {acquire}
    /// (or {grant}) takes by its name: a work item is named by {ItemNamed}, never here.
    /// @dev `name` is whatever bytes the first acquirer sent: untrusted.
    /// @param resource `keccak256(bytes(name))`.
    /// @param name The name as its first acquirer sent it (untrusted bytes).
    event ResourceNamed(bytes32 indexed resource, string name);

    /// @notice Work item `item` of the workset `workset` was leased for the first time ({claimNext},
    /// {grantItem}); `resource` is its id, `keccak256(abi.encode(workset, item))`. Emitted once per
    /// item, just before its first {LeaseAcquired}. The two parts are kept apart: an item is not a
    /// resource name, and item `db` of workset `prod` is not the resource `prod/db`.
    /// @dev `workset` and `item` are whatever bytes the first claimant (or the granting admin) sent: untrusted.
    /// @param resource The item's id, `keccak256(abi.encode(workset, item))`.
    /// @param workset The workset's name (untrusted bytes).
    /// @param item The item's name within it (untrusted bytes).
    event ItemNamed(bytes32 indexed resource, string workset, string item);

    /// @notice `holder` acquired `resource` with fencing `token`, live until
    /// `expiresAt`. `previousToken` is the token it superseded (0 if none) and
    /// `reason` says why the resource was free to take.
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token The new fencing token, above every token issued before.
    /// @param holder Who holds the lease (the caller; a grant's `holder`).
    /// @param expiresAt Chain time the lease stops being live.
    /// @param previousToken The resource's token before this one (0 if never held).
    /// @param reason Why the resource was free to take ({AcquireReason}).
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
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token The lease's token (unchanged by a renewal).
    /// @param holder The holder that renewed.
    /// @param expiresAt The new expiry.
    /// @param progress The holder's progress marker ({renewWithProgress}); 0 for a plain {renew}.
    event LeaseRenewed(
        bytes32 indexed resource, uint256 indexed token, address indexed holder, uint256 expiresAt, bytes32 progress
    );

    /// @notice `holder` released its lease on `resource`; `token` is no longer current.
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token The released lease's token.
    /// @param holder The holder that released it.
    event LeaseReleased(bytes32 indexed resource, uint256 indexed token, address indexed holder);

    /// @notice `holder` recorded `resultDigest` as the result of its work under
    /// `token`, while `token` was current: "complete this job only if the epoch
    /// still matches". The lease itself is unchanged, unless it is a claimed
    /// work item: then the item is done and its lease ended (see {complete}).
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token The token the work was done under (current when recorded).
    /// @param holder The holder that completed.
    /// @param resultDigest The holder's digest of its result.
    event LeaseCompleted(bytes32 indexed resource, uint256 indexed token, address indexed holder, bytes32 resultDigest);

    /// @notice The admin of `resource`'s namespace, `admin`, ended the live lease of `holder`
    /// (`token`): like a release, no lock-delay follows. The next {LeaseAcquired} of the
    /// resource says `Revoked` (or `Granted`, when this revoke is part of a {grant}).
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token The revoked lease's token.
    /// @param holder The revoked lease's holder.
    /// @param admin The namespace's admin that revoked it.
    event LeaseRevoked(bytes32 indexed resource, uint256 indexed token, address indexed holder, address admin);

    /// @notice The admin of `resource`'s namespace, `admin`, issued `token` to `holder`;
    /// emitted right after that grant's {LeaseAcquired} (reason `Granted`).
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token The granted lease's token.
    /// @param holder Who the lease was granted to.
    /// @param admin The namespace's admin that granted it.
    event LeaseGranted(bytes32 indexed resource, uint256 indexed token, address indexed holder, address admin);

    /// @notice `namespace` is the hash of the prefix `name`; emitted once, when the deployer assigns it.
    /// An address namespace is never named: its prefix is "0x" and its address in lowercase hex.
    /// @dev `name` is bytes the deployer chose: untrusted.
    /// @param namespace `keccak256(bytes(name))`.
    /// @param name The prefix the deployer assigned (untrusted bytes).
    event NamespaceNamed(bytes32 indexed namespace, string name);

    /// @notice `admin` offered `namespace` to `pendingAdmin` (0: the offer withdrawn).
    /// @param namespace The namespace's id.
    /// @param admin Its admin, who made the offer.
    /// @param pendingAdmin Who may accept it (0: the offer withdrawn).
    event NamespaceAdminTransferStarted(bytes32 indexed namespace, address indexed admin, address indexed pendingAdmin);

    /// @notice `newAdmin` became the admin of `namespace` (`previousAdmin` 0: assigned at deployment).
    /// @param namespace The namespace's id.
    /// @param previousAdmin The admin before (0: assigned at deployment).
    /// @param newAdmin The admin from now on.
    event NamespaceAdminTransferred(bytes32 indexed namespace, address indexed previousAdmin, address indexed newAdmin);

    /// @notice `admin` set the policy of `namespace`: `maxTtl` (0: the registry's),
    /// `lockDelay` seconds after an expiry, and whether holders must be admitted.
    /// @param namespace The namespace's id.
    /// @param admin Its admin, who set the policy.
    /// @param maxTtl Longest ttl of an acquisition, grant or renewal (0: the registry's).
    /// @param lockDelay Seconds after an expiry during which only the expired holder may acquire.
    /// @param admissionRequired Whether only allowlisted holders may acquire or be granted.
    event NamespacePolicySet(
        bytes32 indexed namespace, address indexed admin, uint256 maxTtl, uint256 lockDelay, bool admissionRequired
    );

    /// @notice `admin` added `holder` to (`admitted`) or removed it from the allowlist of `namespace`.
    /// @param namespace The namespace's id.
    /// @param holder The account added or removed.
    /// @param admitted True: added to the allowlist; false: removed.
    /// @param admin The namespace's admin that changed it.
    event NamespaceAdmissionSet(bytes32 indexed namespace, address indexed holder, bool admitted, address admin);

    /// @notice Operation `index` of a {batchCalls} sent by `caller` on `resource` was refused and did
    /// nothing: `reason` is, byte for byte, the revert data of its lone call, which ran and was undone
    /// (a FencingRegistry error: {FencingRegistryLeaseHeld}, {FencingRegistryLockDelay},
    /// {FencingRegistryNotAdmitted}, {FencingRegistryStaleToken}, ...). For an acquisition
    /// `resource` is `keccak256(bytes(name))`.
    /// @param resource The operation's resource (an acquisition's: `keccak256(bytes(name))`).
    /// @param caller The batch's sender: the holder and actor of each of its operations.
    /// @param index The operation's position in the batch, from 0.
    /// @param reason The lone call's revert data, byte for byte (a FencingRegistry error).
    event BatchOpRefused(bytes32 indexed resource, address indexed caller, uint256 index, bytes reason);

    /// @notice Intent `index` of a {performIntents}, signed by `holder` (its EIP-712 digest: `digest`), was
    /// refused and did nothing: `reason` is a FencingRegistry error, byte for byte: its lone call's
    /// revert data (which ran and was undone), or the intent's own refusal
    /// ({FencingRegistryIntentExpired}, {FencingRegistryInvalidSignature}, {FencingRegistryIntentStale},
    /// {FencingRegistryNonceUsed}). A refused intent spends nothing: it may still land until its deadline.
    /// @param digest The EIP-712 digest of the intent as given: what its holder signed, if anyone did.
    /// @param holder The intent's holder, as given (whether or not it signed it).
    /// @param index The intent's position in the batch, from 0.
    /// @param reason Why, as a FencingRegistry error's revert data.
    event IntentRefused(bytes32 indexed digest, address indexed holder, uint256 index, bytes reason);

    /// @notice ERC-5267. Never emitted: the EIP-712 domain of a registry is fixed.
    event EIP712DomainChanged();

    // ------------------------------------------------------------------
    // Errors (no revert strings). Each carries what a caller needs to act.
    // ------------------------------------------------------------------

    /// @notice A resource name must be 1 to `maxLength` bytes of UTF-8.
    /// @param length The name's length, in bytes.
    /// @param maxLength The longest name allowed ({maxNameLength}).
    error FencingRegistryInvalidName(uint256 length, uint256 maxLength);

    /// @notice A ttl must be 1 to `maxTtl` seconds.
    /// @param ttl The ttl asked for.
    /// @param maxTtl The longest allowed: the registry's, or the namespace's when it is lower.
    error FencingRegistryInvalidTtl(uint256 ttl, uint256 maxTtl);

    /// @notice Deployment: the maximum ttl must be 1 to 2**32 - 1 seconds.
    /// @param maxTtl The maximum ttl given to the constructor.
    error FencingRegistryInvalidMaxTtl(uint256 maxTtl);

    /// @notice Someone else holds a live lease on `resource`: `holder` with
    /// `token` until `expiresAt`. Retry at or after `expiresAt`.
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param holder The live lease's holder.
    /// @param token Its token.
    /// @param expiresAt Its expiry: retry at or after it.
    error FencingRegistryLeaseHeld(bytes32 resource, address holder, uint256 token, uint256 expiresAt);

    /// @notice `token` is below `currentToken`, the latest token of `resource`:
    /// superseded, so whoever holds it lost the lease. (Only the latest token
    /// per resource is stored, so a lower token issued for another resource
    /// reads the same way: either way it does not hold `resource`.)
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token The token given.
    /// @param currentToken The resource's latest token.
    error FencingRegistryStaleToken(bytes32 resource, uint256 token, uint256 currentToken);

    /// @notice `token` was never issued for `resource` (0, or above the
    /// resource's `currentToken`): forged, or meant for another resource.
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token The token given.
    /// @param currentToken The resource's latest token (0 if never held).
    error FencingRegistryUnknownToken(bytes32 resource, uint256 token, uint256 currentToken);

    /// @notice `account` is not the holder of `token` on `resource`; `holder` is.
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token The token given (the resource's latest).
    /// @param account The caller.
    /// @param holder The lease's holder.
    error FencingRegistryNotHolder(bytes32 resource, uint256 token, address account, address holder);

    /// @notice `token` is the resource's latest but its lease expired at `expiredAt`.
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token The token given (the resource's latest).
    /// @param expiredAt The chain time its lease ended.
    error FencingRegistryLeaseExpired(bytes32 resource, uint256 token, uint256 expiredAt);

    /// @notice `token` is the resource's latest but its holder released it.
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token The token given (the resource's latest).
    error FencingRegistryLeaseReleased(bytes32 resource, uint256 token);

    /// @notice A token does not fit the 48 bits it is stored in (2**48 - 1:
    /// ~2.8e14 tokens), or an expiry the 40 bits it is stored in (2**40 - 1:
    /// chain times until the year 36,812).
    /// @param value The token or expiry that does not fit.
    error FencingRegistryUint48Overflow(uint256 value);

    /// @notice {claimNext} takes 1 to `maxCount` items; `count` were given.
    /// @param count How many were given.
    /// @param maxCount The most allowed (512 items for {claimNext}, 64 for a set or a batch).
    error FencingRegistryInvalidItems(uint256 count, uint256 maxCount);

    /// @notice {claimNext}: none of the `count` items of the workset whose name
    /// hashes to `workset` is free: each is done or held live by someone else.
    /// @param workset `keccak256(bytes(workset))` of the workset's name.
    /// @param count How many items were listed.
    error FencingRegistryNothingToClaim(bytes32 workset, uint256 count);

    /// @notice Deployment: a namespace prefix must be 1 to `maxLength` bytes with no `/`, and not
    /// address-shaped (42 bytes starting "0x": those belong to their address); `length` were given.
    /// @param length The prefix's length, in bytes.
    /// @param maxLength The longest prefix allowed.
    error FencingRegistryInvalidNamespace(uint256 length, uint256 maxLength);

    /// @notice Deployment: `namespace` is assigned twice (first to `admin`).
    /// @param namespace The namespace's id.
    /// @param admin The admin it was first assigned to.
    error FencingRegistryNamespaceTaken(bytes32 namespace, address admin);

    /// @notice `account` is not the admin of `namespace` (`admin`; 0 when no admin is written:
    /// nobody administers it, which includes names in no namespace, or it is an address namespace
    /// whose role was never handed over and `account` is not its address).
    /// @param namespace The namespace's id (0 for a name in no namespace).
    /// @param account The caller.
    /// @param admin The admin written down (0: none).
    error FencingRegistryNotNamespaceAdmin(bytes32 namespace, address account, address admin);

    /// @notice `account` is not the pending admin of `namespace` (`pendingAdmin` is).
    /// @param namespace The namespace's id.
    /// @param account The caller.
    /// @param pendingAdmin Who may accept (0: no offer).
    error FencingRegistryNotPendingAdmin(bytes32 namespace, address account, address pendingAdmin);

    /// @notice `namespace` requires admitted holders and `holder` is not on its allowlist.
    /// @param namespace The namespace's id.
    /// @param holder The account that is not on its allowlist.
    error FencingRegistryNotAdmitted(bytes32 namespace, address holder);

    /// @notice The lease of `holder` on `resource` expired and its namespace's lock-delay
    /// runs until `until`: only `holder` may acquire it before then.
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param holder The expired lease's holder, the only account that may acquire meanwhile.
    /// @param until The chain time the lock-delay ends.
    error FencingRegistryLockDelay(bytes32 resource, address holder, uint256 until);

    /// @notice A namespace policy needs `maxTtl` 0 to the registry's maximum and `lockDelay`
    /// 0 to the registry's maximum ttl (each checked when named), and names 1 to 3 of its fields.
    /// @param maxTtl The maxTtl given.
    /// @param lockDelay The lock-delay given.
    /// @param registryMaxTtl The registry's maximum ttl, the bound of both.
    error FencingRegistryInvalidPolicy(uint256 maxTtl, uint256 lockDelay, uint256 registryMaxTtl);

    /// @notice {revoke}: `resource`'s latest lease (`token`) is not live: nothing to revoke.
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token Its latest token (0 if never held).
    error FencingRegistryNotLive(bytes32 resource, uint256 token);

    /// @notice `token` is the resource's latest but its namespace's admin revoked it.
    /// @param resource The resource's id: `keccak256(bytes(name))`, or a work item's (see {ItemNamed}).
    /// @param token The token given (the resource's latest).
    error FencingRegistryLeaseRevoked(bytes32 resource, uint256 token);

    /// @notice `token` is the latest of a claimed work item, but its claimant completed the item:
    /// done for good (its renew, release, complete and checkCurrent fail; no grant reopens it).
    /// @param resource The work item's id.
    /// @param token Its latest token (the completer's).
    error FencingRegistryLeaseCompleted(bytes32 resource, uint256 token);

    /// @notice {acquireMany}, {renewMany}, {releaseMany}: `resource` is listed twice.
    /// @param resource The resource listed twice.
    error FencingRegistryDuplicateResource(bytes32 resource);

    /// @notice {renewMany}, {releaseMany}: the resources must be listed in strictly increasing order of
    /// their ids (as unsigned integers), and `resource` comes right after `previous`, a higher id.
    /// @param resource The resource out of order.
    /// @param previous The resource listed right before it (a higher id).
    error FencingRegistryUnsortedResources(bytes32 resource, bytes32 previous);

    /// @notice {grant}: the holder must not be the zero address.
    /// @param holder The holder given (the zero address).
    error FencingRegistryInvalidHolder(address holder);

    /// @notice Deployment: `prefixes` and `admins` must have the same length.
    /// @param prefixes How many prefixes were given.
    /// @param admins How many admins.
    error FencingRegistryInvalidAssignments(uint256 prefixes, uint256 admins);

    /// @notice {performIntents}: the intent whose digest is `digest` had to land by `deadline`; it is later.
    /// @param digest The intent's EIP-712 digest.
    /// @param deadline Its deadline (chain time).
    error FencingRegistryIntentExpired(bytes32 digest, uint256 deadline);

    /// @notice {performIntents}: `signature` is not `holder`'s for the intent whose EIP-712 digest is `digest`
    /// (in this registry's domain: this chain, this registry): not its key's, or its ERC-1271
    /// `isValidSignature` said no, reverted or ran out of its gas stipend.
    /// @param holder The intent's holder.
    /// @param digest The digest the signature was checked against.
    error FencingRegistryInvalidSignature(address holder, bytes32 digest);

    /// @notice {performIntents}: the state the intent was signed against is gone: its guard `guard` (an
    /// acquisition's latest token, a renewal's expiry) now reads `current`. It landed already, or another
    /// operation moved the state on; a renewal is also refused (`current` then equals `guard`) when it
    /// would not move the expiry later.
    /// @param holder The intent's holder.
    /// @param guard The state it was signed against.
    /// @param current The state now.
    error FencingRegistryIntentStale(address holder, uint256 guard, uint256 current);

    /// @notice {performIntents}: `holder` already spent nonce `nonce` (a complete or claim intent landed with it).
    /// @param holder The intent's holder.
    /// @param nonce The nonce.
    error FencingRegistryNonceUsed(address holder, uint256 nonce);

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
     * @notice {acquire}, but only while nobody holds a live lease on `name`, the caller included:
     * reverts with {FencingRegistryLeaseHeld} (naming the caller as holder) where {acquire} would
     * re-acquire. For "run this once at a time" under one key: a second process of the same key
     * is refused instead of fencing off the first.
     * @dev Everything else as {acquire}: the same checks, policy, events and reasons (never
     * `Reacquired`).
     */
    function acquireExclusive(string calldata name, uint256 ttl) external returns (uint256 token, uint256 expiresAt);

    /**
     * @notice Extend the caller's live lease to `block.timestamp + ttl`.
     * @dev Only the holder, only with the current token, only while live.
     * After expiry a lease cannot be renewed: acquire again for a new token.
     * Reverts with {FencingRegistryStaleToken}, {FencingRegistryUnknownToken},
     * {FencingRegistryNotHolder}, {FencingRegistryLeaseReleased},
     * {FencingRegistryLeaseRevoked}, {FencingRegistryLeaseCompleted} (a done work item),
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
     * (see the contract's header). Emits {ItemNamed} (`workset` and `item`)
     * on an item's first claim, then {LeaseAcquired}. Reverts with {FencingRegistryNothingToClaim} when
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

    /**
     * @notice Acquire every one of `names` for `ttl` seconds in one transaction, all or
     * nothing: one token per resource, consecutive, in the order given.
     * @dev Each name is acquired as {acquire} would (same checks, same events, same
     * policy); any refusal reverts the whole call. Reverts with
     * {FencingRegistryDuplicateResource} if a name is listed twice and
     * {FencingRegistryInvalidItems} unless 1 to 64 names are given.
     * @return firstToken The first name's token; name `i` has `firstToken + i`.
     * @return expiresAt The expiry shared by every lease of the set.
     */
    function acquireMany(string[] calldata names, uint256 ttl) external returns (uint256 firstToken, uint256 expiresAt);

    /**
     * @notice {renew} each `resources[i]` with `tokens[i]`, all or nothing, the resources listed in
     * strictly increasing order of their ids (a caller sorts them; the SDK does).
     * @dev Each item is checked and renewed as {renew} would (same checks, same {LeaseRenewed}), in list
     * order; the first refusal reverts the whole call with its error. The order is checked as it goes, one
     * comparison an item: {FencingRegistryDuplicateResource} for an id listed again,
     * {FencingRegistryUnsortedResources} for a lower one; {FencingRegistryInvalidItems} unless 1 to 64
     * resources and as many tokens are given. (Set pair by pair, the check for repeats cost 205 gas per
     * pair: 24,600 gas a renewMany of 16, 413,000 one of 64.)
     * @return expiresAt The new expiry shared by every lease of the set.
     */
    function renewMany(bytes32[] calldata resources, uint256[] calldata tokens, uint256 ttl)
        external
        returns (uint256 expiresAt);

    /// @notice {release} each `resources[i]` with `tokens[i]`, all or nothing, the resources listed in
    /// strictly increasing order of their ids, checked as {renewMany} checks them.
    function releaseMany(bytes32[] calldata resources, uint256[] calldata tokens) external;

    /**
     * @notice Run 1 to 64 lease operations of the caller in one transaction, each on its own: an
     * operation the lone call would refuse is skipped and logged ({BatchOpRefused}, with that
     * call's revert data), and the others go on. Group commit for many agents behind one account.
     * @dev Each operation IS its lone call ({acquire}, {acquireExclusive}, {renew}, {release}), which
     * the registry calls on itself with `delegatecall` (the same code, storage and `msg.sender`), at
     * that point of the transaction: the same checks, policy, admission, lock-delay, events and
     * reasons, tokens issued in order, as if the lone calls had been mined one after another in one
     * block, except that a refusal does not revert the batch, only undoes that operation: the batch
     * is never all or nothing. The caller (`msg.sender`) is the holder and the actor of every
     * operation: a batch cannot act for another account. A resource listed twice is acted on twice,
     * in order (a second acquisition by the same caller re-acquires it: reason `Reacquired`, the
     * first token fenced off). Reverts only with {FencingRegistryInvalidItems} (0 or more than 64
     * operations) or when an operation runs out of gas, and then nothing is done. (A token past 48
     * bits refuses each acquisition with {FencingRegistryUint48Overflow}, as it refuses the lone call.)
     * @return refused Bit `i` set when operation `i` was refused.
     * @return firstToken The token of the first acquisition that succeeded (0 if none did): the
     * acquisitions that succeeded hold consecutive tokens from it, in operation order.
     */
    function batchCalls(BatchOp[] calldata ops) external returns (uint256 refused, uint256 firstToken);

    /**
     * @notice Run 1 to 64 signed intents, each on its own: anyone may send them (a relayer pays the gas);
     * each intent's signer is the holder and the actor of its operation, exactly as if it had sent the
     * lone call itself. An intent refused is skipped and logged ({IntentRefused}), and the others go on.
     * @dev Each intent is checked, then runs AS its lone call ({acquire}, {acquireExclusive},
     * {renewWithProgress}, {release}, {complete}, {claimNext}): the registry calls itself with that call's
     * calldata and the holder's address appended (ERC-2771, the registry its own trusted forwarder: the
     * lone call reads its holder there when, and only when, its caller is the registry itself), so it
     * gets every check, policy, admission, lock-delay, event and reason of the lone call, the holder in
     * the lease and in every event. The intent's checks, in order, each refusing only that intent:
     * - its deadline: `block.timestamp <= deadline` ({FencingRegistryIntentExpired});
     * - its signature, over the EIP-712 digest of the kind's type in this registry's domain ({eip712Domain}:
     *   this chain id, this registry's address), by `holder`: 65 bytes from its key (ECDSA, low s), or, for
     *   a contract, its ERC-1271 `isValidSignature` called with a gas stipend of 50,000 and read for 32
     *   bytes only, so a contract holder can neither bomb nor hold the batch ({FencingRegistryInvalidSignature});
     * - its replay guard ({FencingRegistryIntentStale}, {FencingRegistryNonceUsed}): an acquisition lands
     *   only while the resource's latest token is `guard` (landing issues a higher one); a renewal only
     *   while the lease's expiry is `guard` and moves it later (landing moves it off `guard`, and intents
     *   only move it later); a release carries its token, which it ends for good; a completion or claim
     *   spends nonce `guard` (Permit2's unordered bitmap, {usedNonceBits}), and a refusal of its lone call
     *   unspends it. An intent thus lands at most once, whoever submits it how often (one exception: a
     *   renewal can land again if the holder itself, by a lone {renew}, moves the expiry back to exactly
     *   its `guard` before its deadline).
     * The EIP-712 types (`holder` the signer; `guard` under the name of what it guards):
     *   Acquire(address holder,string name,uint256 ttl,bool exclusive,uint256 latestToken,uint256 deadline)
     *   Renew(address holder,bytes32 resource,uint256 token,uint256 ttl,bytes32 progress,uint256 latestExpiry,uint256 deadline)
     *   Release(address holder,bytes32 resource,uint256 token,uint256 deadline)
     *   Complete(address holder,bytes32 resource,uint256 token,bytes32 resultDigest,uint256 nonce,uint256 deadline)
     *   Claim(address holder,string workset,string[] items,uint256 ttl,uint256 nonce,uint256 deadline)
     * Reverts only with {FencingRegistryInvalidItems} (0 or more than 64 intents), when an operation runs
     * out of gas, or when less gas is left than a contract holder's stipend needs: then nothing is done,
     * so a sender cannot starve one intent into a refusal.
     * @return refused Bit `i` set when intent `i` was refused.
     */
    function performIntents(Intent[] calldata intents) external returns (uint256 refused);

    /// @notice Permit2-style unordered nonces of complete and claim intents: bit `i` of word `word` set when
    /// `holder` spent nonce `word * 256 + i`.
    function usedNonceBits(address holder, uint256 word) external view returns (uint256);

    // ------------------------------------------------------------------
    // Namespaces (see the header)
    // ------------------------------------------------------------------

    /// @notice Offer `namespace` to `newAdmin` (0 withdraws the offer); the admin stays in
    /// charge until `newAdmin` calls {acceptNamespaceAdmin}. Admin only. An address namespace's
    /// own address is written down as its admin here (so the hand-over's event names it).
    function transferNamespaceAdmin(bytes32 namespace, address newAdmin) external;

    /// @notice Take over `namespace` as its pending admin, its policy and allowlist as they are;
    /// the previous admin keeps no power (an address namespace's own address included).
    function acceptNamespaceAdmin(bytes32 namespace) external;

    /**
     * @notice Set the fields of the policy of `namespace` that `fields` names (admin only);
     * the others keep their values. Applies to later acquisitions, grants and renewals; never
     * evicts a live holder (use {revoke}). Emits {NamespacePolicySet} with the whole policy as
     * it then stands.
     * @param fields {POLICY_MAX_TTL}, {POLICY_LOCK_DELAY}, {POLICY_ADMISSION}, or'ed: the
     * fields to set (1 to 7; else {FencingRegistryInvalidPolicy}). A value not named is ignored.
     * @param maxTtl Longest ttl of an acquisition, grant or renewal; 0: the registry's.
     * Renewals are held to it once their resource was acquired while a maxTtl was set (that
     * acquisition records the resource's namespace, once per resource); a lease acquired
     * before renews under the registry's maximum until it ends or is revoked.
     * @param lockDelay Seconds after a lease EXPIRES during which nobody but its expired
     * holder may acquire the resource (not after a release, revoke or completion).
     * @param admissionRequired Only allowlisted holders ({setAdmission}) may acquire or be
     * granted; holders already live keep their lease until it ends or is revoked.
     */
    function setNamespacePolicy(
        bytes32 namespace,
        uint256 maxTtl,
        uint256 lockDelay,
        bool admissionRequired,
        uint256 fields
    ) external;

    /// @notice Add `holders` to (`admitted`) or remove them from the allowlist of `namespace`
    /// (admin only); one {NamespaceAdmissionSet} per holder.
    function setAdmission(bytes32 namespace, address[] calldata holders, bool admitted) external;

    /**
     * @notice End the live lease on `name` now, as the admin of its namespace.
     * @dev Like a release done by the admin: the holder's token stops being current (its
     * renew, release, complete and every fenced check fail with
     * {FencingRegistryLeaseRevoked}); no lock-delay follows; the next acquisition gets a
     * higher token with reason `Revoked`. Reverts with
     * {FencingRegistryNotNamespaceAdmin} or {FencingRegistryNotLive}. Emits {LeaseRevoked}.
     * @return token The revoked token.
     */
    function revoke(string calldata name) external returns (uint256 token);

    /**
     * @notice Issue a lease on `name` to `holder` for `ttl` seconds, as the admin of its
     * namespace: a new token, higher than every other.
     * @dev A live lease is taken over through the same fenced path as {revoke}
     * ({LeaseRevoked} for the old token first). The holder must be admitted when the
     * namespace requires it; the ttl is held to the namespace's maxTtl; a lock-delay does
     * not bind the admin. Emits {ResourceNamed} on a first acquisition, {LeaseAcquired}
     * (reason `Granted`, `previousToken` the superseded one), then {LeaseGranted}.
     */
    function grant(string calldata name, address holder, uint256 ttl)
        external
        returns (uint256 token, uint256 expiresAt);

    /**
     * @notice {revoke} for the work item `item` of `workset` (see {claimNext}), as the admin of the
     * workset name's namespace: its claimant's token stops being current; the item is free to
     * claim again (it is not done).
     * @dev Reverts with {FencingRegistryNotNamespaceAdmin}, {FencingRegistryNotLive} (also for a
     * done item) or {FencingRegistryInvalidName}. Emits {LeaseRevoked}.
     * @return token The revoked token.
     */
    function revokeItem(string calldata workset, string calldata item) external returns (uint256 token);

    /**
     * @notice {grant} for the work item `item` of `workset`, as the admin of the workset name's
     * namespace: `holder` gets it as a claim (it may renew, release and complete it; its
     * completion marks the item done).
     * @dev As {grant}; also reverts with {FencingRegistryLeaseCompleted} for a done item (no grant
     * reopens it). Emits {ItemNamed} (`workset` and `item`) on the item's first lease,
     * {LeaseRevoked} for a live claim it takes over, {LeaseAcquired} (reason `Granted`) and {LeaseGranted}.
     */
    function grantItem(string calldata workset, string calldata item, address holder, uint256 ttl)
        external
        returns (uint256 token, uint256 expiresAt);

    // ------------------------------------------------------------------
    // Views
    // ------------------------------------------------------------------

    /// @notice The admin, pending admin and policy of `namespace`. `admin` is 0 when none is
    /// written: nobody administers it, or it is an address namespace whose role was never
    /// handed over (then its admin is its address, which the hash does not reveal).
    function namespacePolicy(bytes32 namespace)
        external
        view
        returns (address admin, address pendingAdmin, uint256 maxTtl, uint256 lockDelay, bool admissionRequired);

    /// @notice Whether `holder` may acquire in `namespace` as far as admission goes: true when
    /// the namespace does not require admission, else whether `holder` is on its allowlist.
    function isAdmitted(bytes32 namespace, address holder) external view returns (bool);

    /// @notice Whether `holder` is on the allowlist of `namespace` (whatever the policy).
    function isListed(bytes32 namespace, address holder) external view returns (bool);

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
     * {FencingRegistryStaleToken}, {FencingRegistryLeaseReleased},
     * {FencingRegistryLeaseRevoked}, {FencingRegistryLeaseCompleted} (a done work item) or
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
