// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IFencingRegistry, POLICY_ADMISSION, POLICY_LOCK_DELAY, POLICY_MAX_TTL} from "../../contracts/IFencingRegistry.sol";
import {Vm} from "./support/Test.sol";

/**
 * @dev The invariant fuzzer's only target: every external entry point of the registry, called as one of
 * four actors (two assigned namespace admins, two owners of their address namespaces, each a stranger
 * everywhere else), with time moved to leases' expiries and lock-delays, plus or minus one second.
 *
 * Each handler function picks its arguments from small pools (seven names, six work items, five
 * namespaces: contention needs collisions), makes one call that may be refused (caught: a refusal is a
 * normal outcome, and the fuzzer's depth is not spent on reverts), and records what the call did in
 * ghost state: the tokens issued, for which resource, to whom and until when; who administers each
 * namespace, who was offered it, its policy and allowlist. After every call {_settle} compares the
 * registry's views with the ghost state and judges every lease that stopped being current: it must have
 * expired, or the call was its holder's, or an admin call of its namespace's admin.
 *
 * Nothing here reverts on a finding: a finding is counted in {violations} under its invariant with its
 * first message, and the invariant function (FencingRegistryInvariants.t.sol) fails on it, naming it. The registry
 * under test is forge's build of contracts/FencingRegistry.sol (`deployCode`): the same bytes as the
 * shipped artifact (tests/contract/test_forge_invariants.py compares them), or a mutant's
 * (scripts/forge_mutants.py).
 */
contract RegistryHandler {
    Vm internal constant vm = Vm(0x7109709ECfa91a80626fF3989D68f67F5b1DD12D);

    /// @dev The registry's maxTtl: ttls are drawn far below it (1 to 20 s) so that leases expire.
    uint256 public constant MAX_TTL = 3600;

    // The invariants a finding is counted under (FencingRegistryInvariants.t.sol's invariant names each).
    uint256 public constant TOKENS = 0; // tokens strictly increase, by one per acquisition
    uint256 public constant ONE_HOLDER = 1; // at most one current holder per resource; none lost to a stranger
    uint256 public constant ENDED = 2; // an ended lease's token never becomes current again
    uint256 public constant ADMIN = 3; // no stranger acts on a namespace it does not administer
    uint256 public constant RULES = 4; // policies (admission, maxTtl, lock-delay), done items, expiries
    uint256 public constant INTENTS = 5; // a signed intent lands once, in time, for its signer only

    uint256[6] public violations;
    string[6] public firstViolation;

    /// @dev How often each registry function went through, by its selector; and how leases ended: what the
    /// driver test (test_everyPathIsReached) asserts the handler reaches.
    mapping(bytes4 selector => uint256) public wentThrough;
    uint256 public endedByExpiry;
    uint256 public endedByHolder;
    uint256 public endedByAdmin;
    uint256 public strangersRefused;
    /// @dev Hostile intents (another holder's, late, stale, replayed) sent, all refused (or it is a finding).
    uint256 public hostileIntents;
    /// @dev Intents that landed (each recorded as its signer's lone call).
    uint256 public intentsLanded;

    IFencingRegistry public immutable registry;
    address[4] public actors;
    /// @dev The actors' keys: they sign intents ({performIntents}), which the relayer sends.
    uint256[4] internal _keys;
    address public constant RELAYER = address(0xE1A7);

    uint256 internal constant NO_NAMESPACE = type(uint256).max;
    uint256 internal constant SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141;
    /// @dev Resources 0..6 are names ({acquire}); 7..12 are work items, workset w's item i at 7 + 3w + i.
    uint256 internal constant NAMED = 7;
    uint256 internal constant ITEMS = 6;
    uint256 internal constant RESOURCES = NAMED + ITEMS;
    /// @dev The newest tokens of a resource that {_settle} asks about: one call issues at most three
    /// for one resource (a batch of three), so every token is judged at least once after its call.
    uint256 internal constant WINDOW = 4;

    struct Resource {
        bytes32 id;
        string name; // a name, or an item's workset
        string item; // "" for a name
        uint256 namespace; // index in _namespaces, or NO_NAMESPACE
    }

    struct Namespace {
        bytes32 id;
        address admin; // who administers it now (0: nobody, ever)
        address written; // the admin its slot names (an address namespace's: 0 until a hand-over)
        address pending;
        uint256 maxTtl;
        uint256 lockDelay;
        bool admission;
    }

    struct Token {
        uint256 resource;
        address holder;
        uint256 expiresAt; // as issued or last renewed
        bool ended; // seen not current: never current again
    }

    /// @dev A resource's lease before a call, from {IFencingRegistry.leaseOf}.
    struct Before {
        address holder;
        uint256 expiresAt;
        IFencingRegistry.LeaseStatus status;
    }

    Resource[] internal _resources;
    Namespace[] internal _namespaces;
    string[2] internal _worksets;
    string[3] internal _items = ["i0", "i1", "i2"];
    mapping(uint256 namespace => mapping(address holder => bool)) internal _listed;

    /// @dev Acquisitions that went through (claims and grants included): the registry's latest token.
    uint256 public issued;
    mapping(uint256 resource => uint256[]) internal _tokensOf;
    mapping(uint256 token => Token) internal _tokens;
    mapping(uint256 resource => bool) internal _done;
    /// @dev Intents that landed: a replay of any must be refused.
    IFencingRegistry.Intent[] internal _landed;
    bytes32 internal _domainSeparator;

    /// @dev Who makes the call under way, and whether it is an admin call ({revoke}, {grant}): {_settle}
    /// judges by them each lease the call ended.
    address internal _actor;
    bool internal _adminCall;

    /// @dev The resource time was last moved to (its index + 1; 0: none yet): acquisitions, claims and
    /// grants mostly pick it, so that someone tries to take it at expiry - 1, + 0, + 1 s and at
    /// the end of its lock-delay.
    uint256 internal _focus;

    constructor() {
        for (uint256 i; i < 4; ++i) {
            _keys[i] = 1 + uint256(keccak256(abi.encode("chainfence invariant actor", i))) % (SECP256K1_N - 1);
            actors[i] = vm.addr(_keys[i]);
            vm.label(actors[i], string.concat("actor", _digit(i)));
        }
        string[] memory prefixes = new string[](2);
        address[] memory admins = new address[](2);
        (prefixes[0], prefixes[1], admins[0], admins[1]) = ("team", "ops", actors[0], actors[1]);
        registry = IFencingRegistry(
            vm.deployCode("FencingRegistry.sol:FencingRegistry", abi.encode(MAX_TTL, prefixes, admins))
        );
        vm.label(address(registry), "registry");
        vm.label(RELAYER, "relayer");
        (, string memory domainName, string memory version, uint256 chainId, address verifying,,) =
            registry.eip712Domain();
        _domainSeparator = keccak256(
            abi.encode(
                keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
                keccak256(bytes(domainName)),
                keccak256(bytes(version)),
                chainId,
                verifying
            )
        );

        _addNamespace("team", actors[0]); // 0: assigned by the deployer
        _addNamespace("ops", actors[1]); // 1
        _addNamespace("free", address(0)); // 2: nobody administers it
        string memory own2 = _lowerHex(actors[2]);
        string memory own3 = _lowerHex(actors[3]);
        _addNamespace(own2, actors[2]); // 3: address namespaces, their owners' by construction
        _addNamespace(own3, actors[3]); // 4

        _addName("a", NO_NAMESPACE);
        _addName("free/x", 2);
        _addName("team/x", 0);
        _addName("team/y", 0);
        _addName("ops/x", 1);
        _addName(string.concat(own2, "/x"), 3);
        _addName(string.concat(own3, "/x"), 4);
        // Two namespaces start with a lock-delay (their admins may change it): an assigned one and an
        // address namespace, whose policy makes its slot nonempty.
        _setLockDelay(1, 4);
        _setLockDelay(3, 1);
        _worksets = ["jobs", "team/jobs"];
        for (uint256 w; w < 2; ++w) {
            for (uint256 i; i < 3; ++i) {
                _resources.push(
                    Resource({
                        id: keccak256(abi.encode(_worksets[w], _items[i])),
                        name: _worksets[w],
                        item: _items[i],
                        namespace: w == 0 ? NO_NAMESPACE : 0
                    })
                );
            }
        }
    }

    // ------------------------------------------------------------------
    // Acquisitions
    // ------------------------------------------------------------------

    function acquire(uint256 actorSeed, uint256 nameSeed, uint256 ttlSeed) external {
        (uint256 r, address actor, uint256 ttl) = (_focusOr(nameSeed, NAMED), _actorAt(actorSeed), _ttl(ttlSeed));
        Before memory before = _before(r);
        _act(actor, false);
        vm.prank(actor);
        try registry.acquire(_resources[r].name, ttl) returns (uint256 token, uint256 expiresAt) {
            _through(IFencingRegistry.acquire.selector);
            _acquired(r, actor, ttl, token, expiresAt, before, true);
        } catch {}
        _settle();
    }

    function acquireExclusive(uint256 actorSeed, uint256 nameSeed, uint256 ttlSeed) external {
        uint256 r = _focusOr(nameSeed, NAMED);
        (address actor, uint256 ttl) = (_holderOr(actorSeed, _latest(r)), _ttl(ttlSeed));
        Before memory before = _before(r);
        _act(actor, false);
        vm.prank(actor);
        try registry.acquireExclusive(_resources[r].name, ttl) returns (uint256 token, uint256 expiresAt) {
            _through(IFencingRegistry.acquireExclusive.selector);
            if (before.status == IFencingRegistry.LeaseStatus.Live && before.holder == actor) {
                _violate(RULES, "acquireExclusive superseded the caller's own live lease");
            }
            _acquired(r, actor, ttl, token, expiresAt, before, true);
        } catch {}
        _settle();
    }

    function acquireMany(uint256 actorSeed, uint256 firstSeed, uint256 secondSeed, uint256 ttlSeed) external {
        (uint256 ra, uint256 rb, address actor, uint256 ttl) =
            (_focusOr(firstSeed, NAMED), secondSeed % NAMED, _actorAt(actorSeed), _ttl(ttlSeed));
        string[] memory names = new string[](2);
        (names[0], names[1]) = (_resources[ra].name, _resources[rb].name);
        (Before memory beforeA, Before memory beforeB) = (_before(ra), _before(rb));
        _act(actor, false);
        vm.prank(actor);
        try registry.acquireMany(names, ttl) returns (uint256 firstToken, uint256 expiresAt) {
            _through(IFencingRegistry.acquireMany.selector);
            if (ra == rb) _violate(RULES, "acquireMany took one name twice");
            _acquired(ra, actor, ttl, firstToken, expiresAt, beforeA, true);
            _acquired(rb, actor, ttl, firstToken + 1, expiresAt, beforeB, true);
        } catch {}
        _settle();
    }

    /// @dev claimNext over workset w's three items, listed from item `first` on (so every item gets
    /// its turn at the head of the list).
    function claimNext(uint256 actorSeed, uint256 worksetSeed, uint256 ttlSeed) external {
        uint256 focus = _focusOr(worksetSeed, RESOURCES);
        uint256 w = focus >= NAMED ? (focus - NAMED) / 3 : worksetSeed % 2;
        (uint256 first, address actor, uint256 ttl) = ((worksetSeed >> 8) % 3, _actorAt(actorSeed), _ttl(ttlSeed));
        string[] memory items = new string[](3);
        Before[3] memory before;
        for (uint256 k; k < 3; ++k) {
            items[k] = _items[(first + k) % 3];
            before[k] = _before(NAMED + 3 * w + (first + k) % 3);
        }
        _act(actor, false);
        vm.prank(actor);
        try registry.claimNext(_worksets[w], items, ttl) returns (
            uint256 index, bytes32 resource, uint256 token, uint256 expiresAt
        ) {
            _through(IFencingRegistry.claimNext.selector);
            if (index >= 3) {
                _violate(RULES, "claimNext returned an index past its list");
            } else {
                uint256 r = NAMED + 3 * w + (first + index) % 3;
                if (resource != _resources[r].id) _violate(RULES, "claimNext returned another item's resource");
                if (_done[r]) _violate(RULES, "a completed work item was claimed again");
                _acquired(r, actor, ttl, token, expiresAt, before[index], true);
            }
        } catch {}
        _settle();
    }

    /// @dev batchCalls of one to three operations (acquire, acquireExclusive, renew, release), each on a
    /// resource and token of the pools.
    function batchCalls(uint256 actorSeed, uint256 opsSeed, uint256 ttlSeed) external {
        (address actor, uint256 ttl, uint256 count) = (_actorAt(actorSeed), _ttl(ttlSeed), 1 + opsSeed % 3);
        IFencingRegistry.BatchOp[] memory ops = new IFencingRegistry.BatchOp[](count);
        uint256[] memory rs = new uint256[](count);
        for (uint256 k; k < count; ++k) {
            uint256 s = uint256(keccak256(abi.encode(opsSeed, k)));
            IFencingRegistry.BatchKind kind = IFencingRegistry.BatchKind(s % 4);
            if (kind <= IFencingRegistry.BatchKind.AcquireExclusive) {
                rs[k] = (s >> 8) % NAMED;
                ops[k] = IFencingRegistry.BatchOp(kind, _resources[rs[k]].name, bytes32(0), 0, ttl);
            } else {
                rs[k] = (s >> 8) % RESOURCES;
                uint256 token = _pickToken(rs[k], s >> 16);
                ops[k] = IFencingRegistry.BatchOp(kind, "", _resources[rs[k]].id, token, ttl);
            }
        }
        _act(actor, false);
        vm.prank(actor);
        try registry.batchCalls(ops) returns (uint256 refused, uint256 firstToken) {
            _through(IFencingRegistry.batchCalls.selector);
            uint256 next = firstToken;
            for (uint256 k; k < count; ++k) {
                if ((refused >> k) & 1 == 1) continue;
                IFencingRegistry.BatchKind kind = ops[k].kind;
                if (kind <= IFencingRegistry.BatchKind.AcquireExclusive) {
                    // The lock-delay needs the state between operations: the lone calls' handlers check it.
                    Before memory unknown = Before(address(0), 0, IFencingRegistry.LeaseStatus.Unheld);
                    _acquired(rs[k], actor, ttl, next++, block.timestamp + ttl, unknown, false);
                } else if (kind == IFencingRegistry.BatchKind.Renew) {
                    _renewed(rs[k], ops[k].token, actor, ttl, block.timestamp + ttl);
                } else {
                    _ended(rs[k], ops[k].token, actor, "release");
                }
            }
            if (refused >> count != 0) _violate(RULES, "batchCalls refused an operation it was not given");
        } catch {}
        _settle();
    }

    /// @dev performIntents, sent by the relayer (no role anywhere), of one to three intents signed by one actor with
    /// its key: acquisitions, exclusive acquisitions, renewals, releases, completions on resources of the pools,
    /// or (alone in its batch) a claim, each built against the registry's state as it is now (its guard right).
    /// Now and then one of them is hostile (`attackSeed`): signed by the actor for another holder, past its
    /// deadline, against a stale guard, or a replay of an intent that landed before (anyone's, as it was sent).
    /// A hostile intent must be refused; every other one that lands is recorded as its signer's lone call.
    function performIntents(uint256 actorSeed, uint256 opsSeed, uint256 ttlSeed, uint256 attackSeed) external {
        uint256 a = actorSeed % 4;
        (address actor, uint256 ttl) = (actors[a], _ttl(ttlSeed));
        uint256 count = 1 + opsSeed % 3;
        IFencingRegistry.Intent[] memory intents = new IFencingRegistry.Intent[](count);
        uint256[] memory rs = new uint256[](count);
        for (uint256 k; k < count; ++k) {
            uint256 s = uint256(keccak256(abi.encode(opsSeed, k)));
            (intents[k], rs[k]) = _intent(actor, s, ttl, count == 1);
        }
        uint256 hostile = attackSeed % 8 < 4 ? (attackSeed >> 8) % count : type(uint256).max;
        bool replayed;
        if (hostile < count) {
            ++hostileIntents;
            replayed = _hostile(intents, hostile, a, attackSeed);
        }
        for (uint256 k; k < count; ++k) {
            if (!(replayed && k == hostile)) intents[k].signature = _signed(_keys[a], intents[k]);
        }
        uint256 latestBefore = registry.latestToken();
        _act(actor, false);
        vm.prank(RELAYER);
        try registry.performIntents(intents) returns (uint256 refused) {
            _through(IFencingRegistry.performIntents.selector);
            if (refused >> count != 0) _violate(RULES, "performIntents refused an intent it was not given");
            uint256 next = latestBefore + 1;
            for (uint256 k; k < count; ++k) {
                if ((refused >> k) & 1 == 1) continue;
                if (k == hostile) {
                    _violate(INTENTS, "a hostile intent (another holder's, late, stale or replayed) landed");
                    continue;
                }
                _landed.push(intents[k]);
                ++intentsLanded;
                next = _intentLanded(intents[k], rs[k], actor, next);
            }
        } catch {
            _violate(INTENTS, "performIntents reverted as a whole");
        }
        _settle();
    }

    /// @dev Record intent `intent` (on resource `r`, signed by `actor`) that landed, as its lone call would be;
    /// `next` is the token its acquisition got, if it is one. Returns the next token to issue.
    function _intentLanded(IFencingRegistry.Intent memory intent, uint256 r, address actor, uint256 next)
        internal
        returns (uint256)
    {
        IFencingRegistry.IntentKind kind = intent.kind;
        // The lock-delay needs the state between intents: the lone calls' handlers check it.
        Before memory unknown = Before(address(0), 0, IFencingRegistry.LeaseStatus.Unheld);
        if (kind <= IFencingRegistry.IntentKind.AcquireExclusive) {
            _acquired(r, actor, intent.ttl, next, block.timestamp + intent.ttl, unknown, false);
            return next + 1;
        }
        if (kind == IFencingRegistry.IntentKind.Renew) {
            _renewed(r, intent.token, actor, intent.ttl, block.timestamp + intent.ttl);
        } else if (kind == IFencingRegistry.IntentKind.Release) {
            _ended(r, intent.token, actor, "a release intent");
        } else if (kind == IFencingRegistry.IntentKind.Complete) {
            if (r >= NAMED) {
                _ended(r, intent.token, actor, "a complete intent");
                _done[r] = true;
            } else {
                _checkOperator(r, intent.token, actor, "a complete intent");
            }
        } else {
            // A claim (alone in its batch): the item whose lease now holds the next token.
            uint256 w = r;
            for (uint256 i; i < 3; ++i) {
                uint256 item = NAMED + 3 * w + i;
                (, uint256 token,,) = registry.leaseOf(_resources[item].id);
                if (token == next) {
                    if (_done[item]) _violate(RULES, "a completed work item was claimed again");
                    _acquired(item, actor, intent.ttl, next, block.timestamp + intent.ttl, unknown, false);
                    return next + 1;
                }
            }
            _violate(TOKENS, "a claim intent landed and no item of its workset holds the next token");
        }
        return next;
    }

    /// @dev An intent of `actor`'s from seed `s`, built on the state as it is now (its guard right); its resource
    /// (a claim's: its workset's index).
    function _intent(address actor, uint256 s, uint256 ttl, bool alone)
        internal
        view
        returns (IFencingRegistry.Intent memory intent, uint256 r)
    {
        uint256 kindSeed = s % (alone ? 6 : 5);
        intent.kind = IFencingRegistry.IntentKind(kindSeed);
        intent.holder = actor;
        intent.ttl = ttl;
        intent.deadline = block.timestamp + (s >> 240) % 30;
        if (kindSeed <= 1) {
            r = _focusOr(s >> 8, NAMED);
            intent.name = _resources[r].name;
            (, intent.guard,,) = registry.leaseOf(_resources[r].id);
        } else if (kindSeed <= 4) {
            r = _resourceFor(s >> 8);
            intent.resource = _resources[r].id;
            intent.token = _pickToken(r, s >> 16);
            intent.data = bytes32(s);
            if (kindSeed == 2) {
                (,, intent.guard,) = registry.leaseOf(intent.resource);
            } else if (kindSeed == 4) {
                intent.guard = s >> 128; // a fresh nonce, most likely
            }
        } else {
            r = (s >> 8) % 2;
            intent.name = _worksets[r];
            intent.items = new string[](3);
            for (uint256 i; i < 3; ++i) {
                intent.items[i] = _items[(i + (s >> 16)) % 3];
            }
            intent.guard = s >> 128;
        }
    }

    /// @dev Make intent `k` hostile: signed by actor `a` for another holder, past its deadline, against a stale
    /// guard, or (if any landed before) a replay of an intent that landed, as it was sent. Returns whether it is a
    /// replay (already signed).
    function _hostile(IFencingRegistry.Intent[] memory intents, uint256 k, uint256 a, uint256 attackSeed)
        internal
        view
        returns (bool replayed)
    {
        uint256 attack = attackSeed % 4;
        if (attack == 3 && _landed.length != 0) {
            IFencingRegistry.Intent memory old = _landed[(attackSeed >> 16) % _landed.length];
            (,, uint256 expiresAt,) = registry.leaseOf(old.resource);
            // Not the one replay the registry lets through (the holder moved a renewal's expiry back to its
            // guard with a lone renew: documented), nor a refused claim's nonce (never spent).
            if (!(old.kind == IFencingRegistry.IntentKind.Renew && expiresAt == old.guard)) {
                intents[k] = old;
                return true;
            }
            attack = 0;
        }
        IFencingRegistry.Intent memory intent = intents[k];
        IFencingRegistry.IntentKind kind = intent.kind;
        if (attack == 1) {
            intent.deadline = block.timestamp - 1;
        } else if (attack == 0 || kind == IFencingRegistry.IntentKind.Release || kind >= IFencingRegistry.IntentKind.Complete) {
            // Another holder's, signed by actor a (not its key). (A release's guard is its token, a completion's
            // and a claim's a nonce: a stale one is another's intent, or none.)
            intent.holder = actors[(a + 1 + (attackSeed >> 8) % 3) % 4];
        } else {
            intent.guard += 1 + (attackSeed >> 32) % 3; // a state the registry is not in
            if (kind <= IFencingRegistry.IntentKind.AcquireExclusive) {
                // ... nor reaches in this batch: its other intents may issue a token each, and the resource's
                // latest token + 1 is the next one issued when it is the registry's latest.
                intent.guard = registry.latestToken() + intents.length + 1 + (attackSeed >> 32) % 3;
            }
            if (intent.kind == IFencingRegistry.IntentKind.Renew) {
                // (its expiry moved later: a guard past the renewal's own new expiry cannot be met either)
                intent.guard += 1_000_000;
            }
        }
    }

    /// @dev `key`'s signature of `intent` in the registry's domain (r, s, v).
    function _signed(uint256 key, IFencingRegistry.Intent memory intent) internal view returns (bytes memory) {
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(key, _digest(intent));
        return abi.encodePacked(r, s, v);
    }

    /// @dev The EIP-712 digest of `intent`, computed here from its type (as the registry's header gives it).
    function _digest(IFencingRegistry.Intent memory intent) internal view returns (bytes32) {
        IFencingRegistry.IntentKind kind = intent.kind;
        bytes32 structHash;
        if (kind <= IFencingRegistry.IntentKind.AcquireExclusive) {
            structHash = keccak256(
                abi.encode(
                    keccak256(
                        "Acquire(address holder,string name,uint256 ttl,bool exclusive,uint256 latestToken,uint256 deadline)"
                    ),
                    intent.holder,
                    keccak256(bytes(intent.name)),
                    intent.ttl,
                    kind == IFencingRegistry.IntentKind.AcquireExclusive,
                    intent.guard,
                    intent.deadline
                )
            );
        } else if (kind == IFencingRegistry.IntentKind.Renew) {
            structHash = keccak256(
                abi.encode(
                    keccak256(
                        "Renew(address holder,bytes32 resource,uint256 token,uint256 ttl,bytes32 progress,uint256 latestExpiry,uint256 deadline)"
                    ),
                    intent.holder,
                    intent.resource,
                    intent.token,
                    intent.ttl,
                    intent.data,
                    intent.guard,
                    intent.deadline
                )
            );
        } else if (kind == IFencingRegistry.IntentKind.Release) {
            structHash = keccak256(
                abi.encode(
                    keccak256("Release(address holder,bytes32 resource,uint256 token,uint256 deadline)"),
                    intent.holder,
                    intent.resource,
                    intent.token,
                    intent.deadline
                )
            );
        } else if (kind == IFencingRegistry.IntentKind.Complete) {
            structHash = keccak256(
                abi.encode(
                    keccak256(
                        "Complete(address holder,bytes32 resource,uint256 token,bytes32 resultDigest,uint256 nonce,uint256 deadline)"
                    ),
                    intent.holder,
                    intent.resource,
                    intent.token,
                    intent.data,
                    intent.guard,
                    intent.deadline
                )
            );
        } else {
            bytes32[] memory hashes = new bytes32[](intent.items.length);
            for (uint256 i; i < hashes.length; ++i) {
                hashes[i] = keccak256(bytes(intent.items[i]));
            }
            structHash = keccak256(
                abi.encode(
                    keccak256(
                        "Claim(address holder,string workset,string[] items,uint256 ttl,uint256 nonce,uint256 deadline)"
                    ),
                    intent.holder,
                    keccak256(bytes(intent.name)),
                    keccak256(abi.encodePacked(hashes)),
                    intent.ttl,
                    intent.guard,
                    intent.deadline
                )
            );
        }
        return keccak256(abi.encodePacked(hex"1901", _domainSeparator, structHash));
    }

    // ------------------------------------------------------------------
    // Lease operations
    // ------------------------------------------------------------------

    /// @dev renew, or renewWithProgress (`ttlSeed`'s top bit).
    function renew(uint256 actorSeed, uint256 resourceSeed, uint256 tokenSeed, uint256 ttlSeed) external {
        (uint256 r, bool progress) = (_resourceFor(resourceSeed), ttlSeed >> 255 == 1);
        uint256 token = _pickToken(r, tokenSeed);
        (address actor, uint256 ttl, bytes32 id) = (_holderOr(actorSeed, token), _ttl(ttlSeed), _resources[r].id);
        _act(actor, false);
        vm.prank(actor);
        if (progress) {
            try registry.renewWithProgress(id, token, ttl, bytes32(tokenSeed)) returns (uint256 expiresAt) {
                _through(IFencingRegistry.renewWithProgress.selector);
                _renewed(r, token, actor, ttl, expiresAt);
            } catch {}
        } else {
            try registry.renew(id, token, ttl) returns (uint256 expiresAt) {
                _through(IFencingRegistry.renew.selector);
                _renewed(r, token, actor, ttl, expiresAt);
            } catch {}
        }
        _settle();
    }

    function renewMany(uint256 actorSeed, uint256 firstSeed, uint256 secondSeed, uint256 ttlSeed) external {
        (uint256 ra, uint256 rb, address actor, bytes32[] memory ids, uint256[] memory tokens) =
            _pair(actorSeed, firstSeed, secondSeed);
        uint256 ttl = _ttl(ttlSeed);
        _act(actor, false);
        vm.prank(actor);
        try registry.renewMany(ids, tokens, ttl) returns (uint256 expiresAt) {
            _through(IFencingRegistry.renewMany.selector);
            if (ids.length == 2 && ra == rb) _violate(RULES, "renewMany took one resource twice");
            if (ids.length == 2 && ids[0] > ids[1]) _violate(RULES, "renewMany took a set out of order");
            _renewed(ra, tokens[0], actor, ttl, expiresAt);
            if (ids.length == 2) _renewed(rb, tokens[1], actor, ttl, expiresAt);
        } catch {}
        _settle();
    }

    function release(uint256 actorSeed, uint256 resourceSeed, uint256 tokenSeed) external {
        uint256 r = _resourceFor(resourceSeed);
        uint256 token = _pickToken(r, tokenSeed);
        address actor = _holderOr(actorSeed, token);
        _act(actor, false);
        vm.prank(actor);
        try registry.release(_resources[r].id, token) {
            _through(IFencingRegistry.release.selector);
            _ended(r, token, actor, "release");
        } catch {}
        _settle();
    }

    function releaseMany(uint256 actorSeed, uint256 firstSeed, uint256 secondSeed) external {
        (uint256 ra, uint256 rb, address actor, bytes32[] memory ids, uint256[] memory tokens) =
            _pair(actorSeed, firstSeed, secondSeed);
        _act(actor, false);
        vm.prank(actor);
        try registry.releaseMany(ids, tokens) {
            _through(IFencingRegistry.releaseMany.selector);
            if (ids.length == 2 && ra == rb) _violate(RULES, "releaseMany took one resource twice");
            if (ids.length == 2 && ids[0] > ids[1]) _violate(RULES, "releaseMany took a set out of order");
            _ended(ra, tokens[0], actor, "releaseMany");
            if (ids.length == 2) _ended(rb, tokens[1], actor, "releaseMany");
        } catch {}
        _settle();
    }

    function complete(uint256 actorSeed, uint256 resourceSeed, uint256 tokenSeed) external {
        uint256 r = _resourceFor(resourceSeed);
        uint256 token = _pickToken(r, tokenSeed);
        address actor = _holderOr(actorSeed, token);
        _act(actor, false);
        vm.prank(actor);
        try registry.complete(_resources[r].id, token, bytes32(tokenSeed)) {
            _through(IFencingRegistry.complete.selector);
            if (r >= NAMED) {
                // Every item lease is a claim's or a grantItem's: "claimed", so completing it ends it, done.
                _ended(r, token, actor, "complete");
                _done[r] = true;
            } else {
                _checkOperator(r, token, actor, "complete");
            }
        } catch {}
        _settle();
    }

    // ------------------------------------------------------------------
    // Admin paths: revoke and grant, namespaces' policy, admission and hand-over
    // ------------------------------------------------------------------

    function revoke(uint256 actorSeed, uint256 resourceSeed) external {
        uint256 r = _resourceFor(resourceSeed);
        Resource storage res = _resources[r];
        address actor = _adminOr(actorSeed, res.namespace);
        bool authorized = _administers(actor, res.namespace);
        _act(actor, true);
        vm.prank(actor);
        if (r < NAMED) {
            try registry.revoke(res.name) returns (uint256 token) {
                _through(IFencingRegistry.revoke.selector);
                _revoked(r, token, authorized);
            } catch {
                _refused(authorized);
            }
        } else {
            try registry.revokeItem(res.name, res.item) returns (uint256 token) {
                _through(IFencingRegistry.revokeItem.selector);
                _revoked(r, token, authorized);
            } catch {
                _refused(authorized);
            }
        }
        _settle();
    }

    function grant(uint256 actorSeed, uint256 resourceSeed, uint256 holderSeed, uint256 ttlSeed) external {
        uint256 r = _focusOr(resourceSeed, RESOURCES);
        Resource storage res = _resources[r];
        (address actor, address holder, uint256 ttl) =
            (_adminOr(actorSeed, res.namespace), _actorAt(holderSeed), _ttl(ttlSeed));
        bool authorized = _administers(actor, res.namespace);
        Before memory before = _before(r);
        _act(actor, true);
        vm.prank(actor);
        if (r < NAMED) {
            try registry.grant(res.name, holder, ttl) returns (uint256 token, uint256 expiresAt) {
                _through(IFencingRegistry.grant.selector);
                _granted(r, holder, ttl, token, expiresAt, before, authorized);
            } catch {
                _refused(authorized);
            }
        } else {
            try registry.grantItem(res.name, res.item, holder, ttl) returns (uint256 token, uint256 expiresAt) {
                _through(IFencingRegistry.grantItem.selector);
                _granted(r, holder, ttl, token, expiresAt, before, authorized);
            } catch {
                _refused(authorized);
            }
        }
        _settle();
    }

    function setNamespacePolicy(
        uint256 actorSeed,
        uint256 namespaceSeed,
        uint256 maxTtlSeed,
        uint256 lockDelaySeed,
        uint256 fieldsSeed
    ) external {
        (uint256 n, bool admission) = (namespaceSeed % _namespaces.length, fieldsSeed >> 255 == 1);
        address actor = _adminOr(actorSeed, n);
        // Mostly caps below the ttls drawn (1..20 s) and short delays; now and then one past the registry's.
        uint256 maxTtl = maxTtlSeed % 32 == 31 ? MAX_TTL + 1 : maxTtlSeed % 31;
        uint256 lockDelay = lockDelaySeed % 16 == 15 ? MAX_TTL + 1 : lockDelaySeed % 12;
        uint256 fields = fieldsSeed % 9; // 0 and 8 name no field / an unknown one: refused
        bool valid = fields != 0 && fields <= 7 && (fields & POLICY_MAX_TTL == 0 || maxTtl <= MAX_TTL)
            && (fields & POLICY_LOCK_DELAY == 0 || lockDelay <= MAX_TTL);
        bool authorized = _administers(actor, n);
        _act(actor, false);
        vm.prank(actor);
        try registry.setNamespacePolicy(_namespaces[n].id, maxTtl, lockDelay, admission, fields) {
            _through(IFencingRegistry.setNamespacePolicy.selector);
            if (!authorized) {
                _violate(ADMIN, "a stranger set the policy of a namespace it does not administer");
            } else if (!valid) {
                _violate(RULES, "an invalid policy was accepted");
            } else {
                Namespace storage ns = _namespaces[n];
                if (fields & POLICY_MAX_TTL != 0) ns.maxTtl = maxTtl;
                if (fields & POLICY_LOCK_DELAY != 0) ns.lockDelay = lockDelay;
                if (fields & POLICY_ADMISSION != 0) ns.admission = admission;
            }
        } catch {
            _refused(authorized);
            if (authorized && valid) _violate(ADMIN, "a namespace's admin was refused a valid policy");
        }
        _settleAllowlists();
        _settle();
    }

    /// @dev Admits (`holderSeed`'s top bit) or strikes one or two holders.
    function setAdmission(uint256 actorSeed, uint256 namespaceSeed, uint256 holderSeed) external {
        (uint256 n, bool admitted) = (namespaceSeed % _namespaces.length, holderSeed >> 255 == 1);
        address actor = _adminOr(actorSeed, n);
        address[] memory holders = new address[](1 + holderSeed % 2);
        for (uint256 i; i < holders.length; ++i) {
            holders[i] = _actorAt(holderSeed >> (8 * (i + 1)));
        }
        bool authorized = _administers(actor, n);
        _act(actor, false);
        vm.prank(actor);
        try registry.setAdmission(_namespaces[n].id, holders, admitted) {
            _through(IFencingRegistry.setAdmission.selector);
            if (!authorized) {
                _violate(ADMIN, "a stranger changed the allowlist of a namespace it does not administer");
            } else {
                for (uint256 i; i < holders.length; ++i) {
                    _listed[n][holders[i]] = admitted;
                }
            }
        } catch {
            _refused(authorized);
            if (authorized) _violate(ADMIN, "a namespace's admin was refused an allowlist change");
        }
        _settleAllowlists();
        _settle();
    }

    function transferNamespaceAdmin(uint256 actorSeed, uint256 namespaceSeed, uint256 newAdminSeed) external {
        uint256 n = namespaceSeed % _namespaces.length;
        (address actor, address newAdmin) = (_adminOr(actorSeed, n), _actorAt(newAdminSeed));
        bool authorized = _administers(actor, n);
        _act(actor, false);
        vm.prank(actor);
        try registry.transferNamespaceAdmin(_namespaces[n].id, newAdmin) {
            _through(IFencingRegistry.transferNamespaceAdmin.selector);
            if (!authorized) {
                _violate(ADMIN, "a stranger offered a namespace it does not administer");
            } else {
                Namespace storage ns = _namespaces[n];
                if (ns.written == address(0)) ns.written = actor;
                ns.pending = newAdmin;
            }
        } catch {
            _refused(authorized);
            if (authorized) _violate(ADMIN, "a namespace's admin was refused a hand-over");
        }
        _settleAllowlists();
        _settle();
    }

    function acceptNamespaceAdmin(uint256 actorSeed, uint256 namespaceSeed) external {
        uint256 n = namespaceSeed % _namespaces.length;
        Namespace storage ns = _namespaces[n];
        address actor = actorSeed % 2 == 0 && ns.pending != address(0) ? ns.pending : _actorAt(actorSeed >> 1);
        bool offered = ns.pending != address(0) && ns.pending == actor;
        _act(actor, false);
        vm.prank(actor);
        try registry.acceptNamespaceAdmin(ns.id) {
            _through(IFencingRegistry.acceptNamespaceAdmin.selector);
            if (!offered) {
                _violate(ADMIN, "a namespace was taken by an account nobody offered it to");
            } else {
                (ns.admin, ns.written, ns.pending) = (actor, actor, address(0));
            }
        } catch {
            _refused(offered);
            if (offered) _violate(ADMIN, "the offered admin was refused the namespace");
        }
        _settleAllowlists();
        _settle();
    }

    // ------------------------------------------------------------------
    // Time: to a lease's expiry or the end of its lock-delay, one second either side; or a few seconds on
    // ------------------------------------------------------------------

    function warpToExpiry(uint256 resourceSeed, uint256 offsetSeed) external {
        uint256 r = _resourceFor(resourceSeed);
        _focus = r + 1;
        uint256 expiresAt = _tokens[_latest(r)].expiresAt;
        uint256 n = _resources[r].namespace;
        if (offsetSeed % 2 == 1 && n != NO_NAMESPACE) expiresAt += _namespaces[n].lockDelay;
        uint256 target = expiresAt + (offsetSeed >> 1) % 3; // expiry - 1, expiry, expiry + 1
        target = target > 0 ? target - 1 : 0;
        vm.warp(target > block.timestamp ? target : block.timestamp + 1);
        _act(address(0), false);
        _settle();
    }

    function wait(uint256 secondsSeed) external {
        vm.warp(block.timestamp + 1 + secondsSeed % 30);
        _act(address(0), false);
        _settle();
    }

    // ------------------------------------------------------------------
    // For the invariant functions
    // ------------------------------------------------------------------

    /// @dev The handler functions the fuzzer calls (views and helpers excluded).
    function selectors() external pure returns (bytes4[] memory s) {
        s = new bytes4[](19);
        (s[0], s[1], s[2], s[3]) =
            (this.acquire.selector, this.acquireExclusive.selector, this.acquireMany.selector, this.claimNext.selector);
        (s[4], s[5], s[6], s[7]) =
            (this.batchCalls.selector, this.renew.selector, this.renewMany.selector, this.release.selector);
        (s[8], s[9], s[10], s[11]) =
            (this.releaseMany.selector, this.complete.selector, this.revoke.selector, this.grant.selector);
        (s[12], s[13], s[14], s[15]) = (
            this.setNamespacePolicy.selector,
            this.setAdmission.selector,
            this.transferNamespaceAdmin.selector,
            this.acceptNamespaceAdmin.selector
        );
        (s[16], s[17], s[18]) = (this.warpToExpiry.selector, this.wait.selector, this.performIntents.selector);
    }

    /// @dev "" if no invariant is broken; else each broken one's name and its first finding. Every check runs
    /// in the handler, after every call ({_settle}): the invariant function only reads this (forge calls it
    /// after every call too, and a check there cost 40% of a run's time).
    function broken() external view returns (string memory found) {
        for (uint256 invariant; invariant < 6; ++invariant) {
            if (violations[invariant] != 0) {
                found = string.concat(found, _invariantName(invariant), ": ", firstViolation[invariant], "; ");
            }
        }
    }

    function _invariantName(uint256 invariant) internal pure returns (string memory) {
        if (invariant == TOKENS) return "tokens strictly increase";
        if (invariant == ONE_HOLDER) return "at most one current holder per resource";
        if (invariant == ENDED) return "an ended lease's token never becomes current again";
        if (invariant == ADMIN) return "no stranger acts on a namespace";
        if (invariant == INTENTS) return "a signed intent lands once, in time, for its signer only";
        return "policies and work items hold";
    }

    // ------------------------------------------------------------------
    // Recording what went through
    // ------------------------------------------------------------------

    function _acquired(
        uint256 r,
        address holder,
        uint256 ttl,
        uint256 token,
        uint256 expiresAt,
        Before memory before,
        bool lockDelayKnown
    ) internal {
        _issue(r, holder, ttl, token, expiresAt);
        uint256 n = _resources[r].namespace;
        if (n == NO_NAMESPACE) return;
        Namespace storage ns = _namespaces[n];
        _checkPolicy(n, holder, ttl);
        if (
            lockDelayKnown && before.status == IFencingRegistry.LeaseStatus.Expired && before.holder != holder
                && block.timestamp < before.expiresAt + ns.lockDelay
        ) _violate(RULES, "a resource was taken from its last holder within the lock-delay");
    }

    function _granted(
        uint256 r,
        address holder,
        uint256 ttl,
        uint256 token,
        uint256 expiresAt,
        Before memory before,
        bool authorized
    ) internal {
        if (!authorized) _violate(ADMIN, "a stranger granted a lease in a namespace it does not administer");
        if (_done[r] || before.status == IFencingRegistry.LeaseStatus.Done) {
            _violate(RULES, "a grant reopened a completed work item");
        }
        _issue(r, holder, ttl, token, expiresAt);
        if (_resources[r].namespace != NO_NAMESPACE) _checkPolicy(_resources[r].namespace, holder, ttl);
    }

    function _revoked(uint256 r, uint256 token, bool authorized) internal {
        if (!authorized) _violate(ADMIN, "a stranger revoked a lease in a namespace it does not administer");
        if (token != _latest(r)) _violate(ONE_HOLDER, "revoke ended a token other than the resource's latest");
    }

    function _issue(uint256 r, address holder, uint256 ttl, uint256 token, uint256 expiresAt) internal {
        ++issued;
        if (token != issued) _violate(TOKENS, "an acquisition's token is not the previous one + 1");
        if (_tokens[token].holder != address(0)) _violate(TOKENS, "a token was issued twice");
        if (expiresAt != block.timestamp + ttl) _violate(RULES, "a lease's expiry is not now + ttl");
        _tokens[token] = Token({resource: r, holder: holder, expiresAt: expiresAt, ended: false});
        _tokensOf[r].push(token);
    }

    function _renewed(uint256 r, uint256 token, address actor, uint256 ttl, uint256 expiresAt) internal {
        _checkOperator(r, token, actor, "renew");
        if (expiresAt != block.timestamp + ttl) _violate(RULES, "a renewal's expiry is not now + ttl");
        _tokens[token].expiresAt = expiresAt;
    }

    function _ended(uint256 r, uint256 token, address actor, string memory what) internal {
        _checkOperator(r, token, actor, what);
    }

    /// @dev A lease operation went through: `token` must be `r`'s current token, held by `actor`.
    function _checkOperator(uint256 r, uint256 token, address actor, string memory what) internal {
        Token storage t = _tokens[token];
        if (token == 0 || t.resource != r || token != _latest(r)) {
            _violate(ONE_HOLDER, string.concat(what, " went through with a token that is not the resource's current one"));
        } else if (t.holder != actor) {
            _violate(ONE_HOLDER, string.concat(what, " went through for an account that does not hold the lease"));
        } else if (t.ended) {
            _violate(ENDED, string.concat(what, " went through on an ended lease"));
        }
    }

    function _checkPolicy(uint256 n, address holder, uint256 ttl) internal {
        Namespace storage ns = _namespaces[n];
        if (ns.admission && !_listed[n][holder]) _violate(RULES, "a holder its namespace does not admit got a lease");
        if (ns.maxTtl != 0 && ttl > ns.maxTtl) _violate(RULES, "a lease got a ttl past its namespace's maxTtl");
    }

    // ------------------------------------------------------------------
    // After every call: the registry's views against the ghost state
    // ------------------------------------------------------------------

    function _settle() internal {
        for (uint256 r; r < RESOURCES; ++r) {
            _settleResource(r);
        }
        if (registry.latestToken() != issued) {
            _violate(TOKENS, "the registry's latest token is not the number of acquisitions that went through");
        }
        _settleNamespaces();
    }

    /// @dev Every namespace's admin, pending admin and policy are what the admin calls that went through set:
    /// a change no successful admin call made, by any path, shows here.
    function _settleNamespaces() internal {
        for (uint256 n; n < _namespaces.length; ++n) {
            Namespace storage ns = _namespaces[n];
            (address admin, address pending, uint256 maxTtl, uint256 lockDelay, bool admission) =
                registry.namespacePolicy(ns.id);
            if (admin != ns.written) _violate(ADMIN, "a namespace's admin changed without an accepted hand-over");
            if (pending != ns.pending) _violate(ADMIN, "a namespace's pending admin is not the one its admin offered");
            if (maxTtl != ns.maxTtl || lockDelay != ns.lockDelay || admission != ns.admission) {
                _violate(ADMIN, "a namespace's policy is not the one its admin set");
            }
        }
    }

    /// @dev Every namespace's allowlist (isListed, isAdmitted) is what its admins set: after each call of the
    /// namespace functions, the allowlists' only writers (asking 40 views after every call doubled a run).
    function _settleAllowlists() internal {
        for (uint256 n; n < _namespaces.length; ++n) {
            Namespace storage ns = _namespaces[n];
            for (uint256 i; i < 4; ++i) {
                bool listed = _listed[n][actors[i]];
                if (registry.isListed(ns.id, actors[i]) != listed) {
                    _violate(ADMIN, "a namespace's allowlist is not the one its admin set");
                }
                if (registry.isAdmitted(ns.id, actors[i]) != (!ns.admission || listed)) {
                    _violate(ADMIN, "isAdmitted disagrees with the namespace's admission and allowlist");
                }
            }
        }
    }

    function _settleResource(uint256 r) internal {
        bytes32 id = _resources[r].id;
        uint256[] storage tokens = _tokensOf[r];
        uint256 count = tokens.length;
        uint256 currents;
        for (uint256 i = count > WINDOW ? count - WINDOW : 0; i < count; ++i) {
            uint256 token = tokens[i];
            Token storage t = _tokens[token];
            if (registry.isCurrent(id, token)) {
                ++currents;
                if (t.ended) _violate(ENDED, "an ended lease's token is current again");
                if (block.timestamp >= t.expiresAt) _violate(ENDED, "a token is current at or past its expiry");
            } else if (!t.ended) {
                t.ended = true;
                // Ended before its expiry: by its holder, or by its namespace's admin (revoke, grant).
                if (block.timestamp >= t.expiresAt) {
                    ++endedByExpiry;
                } else if (_actor == t.holder) {
                    ++endedByHolder;
                } else if (_adminCall && _administers(_actor, _resources[r].namespace)) {
                    ++endedByAdmin;
                } else {
                    _violate(
                        ONE_HOLDER, "a live lease was ended by someone who neither held it nor administers its namespace"
                    );
                }
            }
        }
        if (currents > 1) _violate(ONE_HOLDER, "two tokens are current for one resource");

        (address holder, uint256 latest, uint256 expiresAt, IFencingRegistry.LeaseStatus status) = registry.leaseOf(id);
        if (latest != (count == 0 ? 0 : tokens[count - 1])) {
            _violate(TOKENS, "a resource's lease holds a token other than the last one issued for it");
        } else if (status == IFencingRegistry.LeaseStatus.Live) {
            Token storage t = _tokens[latest];
            if (!registry.isCurrent(id, latest)) _violate(ONE_HOLDER, "leaseOf says live, isCurrent says not");
            if (holder != t.holder) {
                _violate(ONE_HOLDER, "the live lease's holder is not the account its token was issued to");
            }
            if (expiresAt != t.expiresAt) _violate(RULES, "the live lease's expiry is not the one last set");
            if (t.ended) _violate(ENDED, "an ended lease is live again");
            try registry.checkCurrent(id, latest) returns (address checkedHolder, uint256 checkedExpiresAt) {
                if (checkedHolder != holder || checkedExpiresAt != expiresAt) {
                    _violate(ONE_HOLDER, "checkCurrent and leaseOf name different leases");
                }
            } catch {
                _violate(ONE_HOLDER, "checkCurrent refuses the live lease's token");
            }
        } else if (latest != 0) {
            if (registry.isCurrent(id, latest)) _violate(ENDED, "a token is current while its lease is not live");
            try registry.checkCurrent(id, latest) {
                _violate(ENDED, "checkCurrent accepts the token of a lease that is not live");
            } catch {}
        }
        if (_done[r] && status != IFencingRegistry.LeaseStatus.Done) {
            _violate(RULES, "a completed work item is no longer done");
        }
    }

    // ------------------------------------------------------------------
    // Picking arguments
    // ------------------------------------------------------------------

    function _actorAt(uint256 seed) internal view returns (address) {
        return actors[seed % 4];
    }

    /// @dev Mostly the holder of `token` (so that lease operations go through), sometimes anyone.
    function _holderOr(uint256 seed, uint256 token) internal view returns (address) {
        address holder = _tokens[token].holder;
        return seed % 4 != 3 && holder != address(0) ? holder : _actorAt(seed >> 2);
    }

    /// @dev Half the time the namespace's admin (if it has one), else anyone: often a stranger.
    function _adminOr(uint256 seed, uint256 n) internal view returns (address) {
        if (seed % 2 == 0 && n != NO_NAMESPACE && _namespaces[n].admin != address(0)) return _namespaces[n].admin;
        return _actorAt(seed >> 1);
    }

    /// @dev Mostly the resource time was last moved to, if it is one of the first `count`; else any.
    function _focusOr(uint256 seed, uint256 count) internal view returns (uint256) {
        uint256 focus = _focus;
        if ((seed >> 250) % 4 != 3 && focus != 0 && focus - 1 < count) return focus - 1;
        return seed % count;
    }

    /// @dev Mostly a resource whose latest lease is live (where lease operations, revokes and expiries
    /// happen), else any.
    function _resourceFor(uint256 seed) internal view returns (uint256) {
        uint256 first = seed % RESOURCES;
        if ((seed >> 250) % 4 != 3) {
            for (uint256 k; k < RESOURCES; ++k) {
                uint256 r = (first + k) % RESOURCES;
                Token storage t = _tokens[_latest(r)];
                if (!t.ended && t.expiresAt > block.timestamp) return r;
            }
        }
        return first;
    }

    /// @dev 1 to 20 s; now and then 0 or past the registry's maxTtl (refused).
    function _ttl(uint256 seed) internal pure returns (uint256) {
        uint256 s = seed % 32;
        if (s == 0) return 0;
        if (s == 1) return MAX_TTL + 1;
        return 1 + (seed >> 5) % 20;
    }

    /// @dev Mostly `r`'s latest token; else an older one of it, another resource's, or one never issued.
    function _pickToken(uint256 r, uint256 seed) internal view returns (uint256) {
        uint256[] storage tokens = _tokensOf[r];
        uint256 count = tokens.length;
        uint256 s = seed % 8;
        if (count == 0 || s == 7) return issued + 1 + (seed >> 8) % 2;
        if (s < 5) return tokens[count - 1];
        if (s == 5) return tokens[(seed >> 8) % count];
        return _latest((r + 1 + (seed >> 8) % (RESOURCES - 1)) % RESOURCES);
    }

    /// @dev Two resources, a token of each, and who acts: mostly the first token's holder, and then mostly
    /// a second resource whose latest token it holds too (a set operation goes through only if it holds
    /// every token in it).
    function _pair(uint256 actorSeed, uint256 firstSeed, uint256 secondSeed)
        internal
        view
        returns (uint256 ra, uint256 rb, address actor, bytes32[] memory ids, uint256[] memory tokens)
    {
        (ids, tokens) = (new bytes32[](2), new uint256[](2));
        ra = _resourceFor(firstSeed);
        // Mostly the latest tokens: both must be current for the operation to go through.
        tokens[0] = (firstSeed >> 8) % 4 != 3 ? _latest(ra) : _pickToken(ra, firstSeed >> 10);
        actor = _holderOr(actorSeed, tokens[0]);
        rb = secondSeed % RESOURCES;
        if (secondSeed >> 254 != 3) {
            for (uint256 k = 1; k < RESOURCES; ++k) {
                uint256 r = (ra + k + secondSeed % RESOURCES) % RESOURCES;
                Token storage t = _tokens[_latest(r)];
                if (t.holder == actor && !t.ended && t.expiresAt > block.timestamp) {
                    rb = r;
                    break;
                }
            }
        }
        tokens[1] = (secondSeed >> 8) % 4 != 3 ? _latest(rb) : _pickToken(rb, secondSeed >> 10);
        (ids[0], ids[1]) = (_resources[ra].id, _resources[rb].id);
        // Half the time in the order the registry takes (increasing ids); else as picked, which it must refuse when
        // out of order. (Decided by a hash of the seed: the fuzzer's seeds are often small, their high bits zero.)
        uint256 shape = uint256(keccak256(abi.encode(secondSeed, "set shape")));
        if (shape % 2 == 0 && ids[0] > ids[1]) {
            (ra, rb) = (rb, ra);
            (ids[0], ids[1]) = (ids[1], ids[0]);
            (tokens[0], tokens[1]) = (tokens[1], tokens[0]);
        }
        // A set of one, now and then: the lone lease the first pick found (a pair needs two live leases of one actor).
        if ((shape >> 1) % 4 == 0) {
            rb = ra;
            assembly ("memory-safe") {
                mstore(ids, 1)
                mstore(tokens, 1)
            }
        }
    }

    function _latest(uint256 r) internal view returns (uint256) {
        uint256 count = _tokensOf[r].length;
        return count == 0 ? 0 : _tokensOf[r][count - 1];
    }

    function _before(uint256 r) internal view returns (Before memory before) {
        (before.holder,, before.expiresAt, before.status) = registry.leaseOf(_resources[r].id);
    }

    function _administers(address account, uint256 n) internal view returns (bool) {
        return n != NO_NAMESPACE && account != address(0) && _namespaces[n].admin == account;
    }

    function _act(address actor, bool adminCall) internal {
        (_actor, _adminCall) = (actor, adminCall);
    }

    function _refused(bool authorized) internal {
        if (!authorized) ++strangersRefused;
    }

    function _through(bytes4 selector) internal {
        ++wentThrough[selector];
    }

    function _violate(uint256 invariant, string memory what) internal {
        if (violations[invariant]++ == 0) firstViolation[invariant] = what;
    }

    // ------------------------------------------------------------------
    // Set-up
    // ------------------------------------------------------------------

    function _addNamespace(string memory prefix, address admin) internal {
        // An assigned namespace's slot names its admin; an address namespace's names none until a hand-over.
        bool assigned = bytes(prefix).length != 42;
        _namespaces.push(
            Namespace({
                id: keccak256(bytes(prefix)),
                admin: admin,
                written: assigned ? admin : address(0),
                pending: address(0),
                maxTtl: 0,
                lockDelay: 0,
                admission: false
            })
        );
    }

    function _setLockDelay(uint256 n, uint256 lockDelay) internal {
        Namespace storage ns = _namespaces[n];
        vm.prank(ns.admin);
        registry.setNamespacePolicy(ns.id, 0, lockDelay, false, POLICY_LOCK_DELAY);
        ns.lockDelay = lockDelay;
    }

    function _addName(string memory name, uint256 n) internal {
        _resources.push(Resource({id: keccak256(bytes(name)), name: name, item: "", namespace: n}));
    }

    /// @dev "0x" and the 40 lowercase hex digits of `account`: its address namespace's prefix.
    function _lowerHex(address account) internal pure returns (string memory) {
        bytes memory text = new bytes(42);
        (text[0], text[1]) = ("0", "x");
        for (uint256 i; i < 20; ++i) {
            uint8 b = uint8(uint160(account) >> (8 * (19 - i)));
            text[2 + 2 * i] = bytes("0123456789abcdef")[b >> 4];
            text[3 + 2 * i] = bytes("0123456789abcdef")[b & 15];
        }
        return string(text);
    }

    function _digit(uint256 i) internal pure returns (string memory) {
        return string(abi.encodePacked(bytes1(uint8(48 + i))));
    }
}
